// The live feed: follows /ui/feed/events (server-sent events) and puts each
// new entry on top of the table. Built with textContent only: nothing from
// an entry is ever read as HTML (and the server has rendered what a
// request carried safe: no bidirectional override reorders a row). Pause keeps new rows aside until resumed.
(function () {
  var body = document.getElementById("feed");
  if (!body || !body.dataset.stream || !window.EventSource) return;
  var pause = document.getElementById("pause"), status = document.getElementById("status");
  var paused = false, held = [];
  var url = body.dataset.stream + (body.dataset.stream.indexOf("?") < 0 ? "?" : "&") + "after=" + body.dataset.last;
  var es = new EventSource(url);
  function cell(tr, text, cls) { var td = document.createElement("td"); td.textContent = text; if (cls) td.className = cls; tr.appendChild(td); return td; }
  function link(tr, href, text) { var td = cell(tr, ""); if (text) { var a = document.createElement("a"); a.href = href; a.textContent = text; td.appendChild(a); } }
  function add(e) {
    var tr = document.createElement("tr");
    tr.dataset.id = e.id; tr.dataset.phase = e.phase;
    cell(tr, e.seq, "num"); cell(tr, e.ts); cell(tr, e.agent); cell(tr, e.type); cell(tr, e.tool); cell(tr, e.phase);
    cell(tr, e.decision, e.decision === "deny" ? "deny" : e.decision === "allow" ? "allow" : "other");
    cell(tr, e.rule); cell(tr, e.ms ? e.ms.toFixed(1) : "", "num");
    link(tr, "/ui/session/" + encodeURIComponent(e.session), e.sessionShown);
    link(tr, "/ui/entry/" + encodeURIComponent(e.id), e.id.slice(0, 12));
    body.insertBefore(tr, body.firstChild);
    while (body.rows.length > 500) body.deleteRow(body.rows.length - 1);
  }
  es.onmessage = function (m) { var e = JSON.parse(m.data); if (paused) { held.push(e); status.textContent = held.length + " new"; } else add(e); };
  es.onopen = function () { status.textContent = paused ? "paused" : "live"; };
  es.onerror = function () { status.textContent = "reconnecting…"; };
  pause.hidden = false;
  pause.onclick = function () {
    paused = !paused;
    pause.textContent = paused ? "Resume" : "Pause";
    if (!paused) { held.forEach(add); held = []; }
    status.textContent = paused ? "paused" : "live";
  };
})();
