package approval

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/gateway"
)

func TestLinks(t *testing.T) {
	t.Parallel()
	l := NewLinks()
	now := time.Unix(1_800_000_000, 0)
	l.now = func() time.Time { return now }
	c := Claims{Call: "c1", Digest: "d1", Policy: "p1", Approve: true, Notifier: "slack-0", Expires: now.Unix() + 60}
	tok := l.Sign(c)
	if got, err := l.Verify(tok); err != nil || got != c {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	_, payload, _ := strings.Cut(tok, ".")
	payload, sig, _ := strings.Cut(payload, ".")
	flipped := c
	flipped.Approve = false
	fb, _ := json.Marshal(flipped)
	other := NewLinks()
	other.now = l.now
	for _, bad := range []struct {
		name, tok string
		want      error
	}{
		{"empty", "", ErrLinkMalformed},
		{"another version", "v2." + payload + "." + sig, ErrLinkMalformed},
		{"no signature", "v1." + payload, ErrLinkMalformed},
		{"a third dot", tok + ".x", ErrLinkMalformed},
		{"not base64", "v1.%%%." + sig, ErrLinkMalformed},
		{"the answer flipped", "v1." + base64.RawURLEncoding.EncodeToString(fb) + "." + sig, ErrLinkForged},
		{"the signature cut", tok[:len(tok)-3], ErrLinkForged},
		{"another gateway's", other.Sign(c), ErrLinkForged},
		{"too long", tok + strings.Repeat("A", MaxLink), ErrLinkMalformed},
	} {
		if _, err := l.Verify(bad.tok); !errors.Is(err, bad.want) {
			t.Errorf("%s: %v, want %v", bad.name, err, bad.want)
		}
	}
	now = now.Add(61 * time.Second)
	if _, err := l.Verify(tok); !errors.Is(err, ErrLinkExpired) {
		t.Errorf("expired: %v", err)
	}
}

// FuzzLinkVerify: no token panics the verifier, and every token it
// accepts is one it signed, claims intact.
func FuzzLinkVerify(f *testing.F) {
	l := NewLinks()
	c := Claims{Call: "c1", Digest: "d", Policy: "p", Approve: true, Notifier: "n", Expires: 1 << 40}
	good := l.Sign(c)
	for _, s := range []string{good, "", "v1..", "v1.e30.", "v1.e30.AAAA", good + "x", strings.Replace(good, "v1", "v2", 1)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		got, err := l.Verify(tok)
		if err != nil {
			return
		}
		if got != c { // the only claims ever signed with this key
			t.Fatalf("accepted a token it did not sign: %q → %+v", tok, got)
		}
	})
}

// receiver is a notifier's endpoint on loopback: it records each body and
// answers with the status next gives (200 when nil), or never (hang).
type receiver struct {
	mu     sync.Mutex
	bodies [][]byte
	next   func(n int) int
	hang   chan struct{}
	srv    *httptest.Server
}

func newReceiver(t *testing.T, next func(n int) int) *receiver {
	r := &receiver{next: next, hang: make(chan struct{})}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.bodies = append(r.bodies, b)
		n := len(r.bodies)
		r.mu.Unlock()
		status := 200
		if r.next != nil {
			status = r.next(n)
		}
		if status == 0 {
			select {
			case <-r.hang:
			case <-req.Context().Done():
			}
			return
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(func() { close(r.hang); r.srv.Close() })
	return r
}

func (r *receiver) got() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.bodies...)
}

func (r *receiver) notice(t *testing.T, i int) Notice {
	t.Helper()
	var n Notice
	for range 400 {
		if b := r.got(); len(b) > i {
			if err := json.Unmarshal(b[i], &n); err != nil {
				t.Fatalf("notice %d: %v: %s", i, err, b[i])
			}
			return n
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no notice %d arrived", i)
	return n
}

func token(link string) string { return link[strings.LastIndex(link, "/")+1:] }

func notifyStore(ns ...*Notifier) *Store {
	s := New(nil)
	s.SetNotify(&Notify{Notifiers: ns, LinkBase: "https://gw.example", Logger: slog.New(slog.DiscardHandler)})
	return s
}

func sessionCall(id string) *gateway.Call {
	c := askCall(id, `{"command":"touch x"}`)
	c.SessionFacts = &gateway.SessionFacts{Agent: gateway.ScopeFacts{Labels: map[string]gateway.Label{
		"private": {Call: "c0", Tool: "read", Target: "/workspace/.env"}}}}
	return c
}

// TestNotifyAndAnswerByLink: a webhook receiver gets the call, its
// session's labels and two links; the approve link answers it once, and
// neither it nor the deny link answers again.
func TestNotifyAndAnswerByLink(t *testing.T) {
	t.Parallel()
	r := newReceiver(t, nil)
	s := notifyStore(&Notifier{Name: "hook", Kind: KindWebhook, URL: r.srv.URL, Timeout: time.Second, Attempts: 1})
	dec := asking
	dec.Policy = "pol1"
	out := make(chan gateway.Approval, 1)
	go func() { out <- s.Await(context.Background(), sessionCall("n1"), dec, time.Minute) }()
	n := r.notice(t, 0)
	if n.Type != "toolgate.approval.asked" || n.Notifier != "hook" || n.Call.ID != "n1" || n.Call.Policy != "pol1" ||
		n.Call.AgentLabels["private"].Target != "/workspace/.env" || !strings.HasPrefix(n.Links.Approve, "https://gw.example"+LinkPath) {
		t.Fatalf("notice %+v", n)
	}
	if _, p, err := s.Link(token(n.Links.Deny)); err != nil || p.ID != "n1" {
		t.Fatalf("looking at the deny link: %v", err)
	}
	if c, err := s.AnswerLink(token(n.Links.Approve), func(c Claims) string { return "link sent to " + c.Notifier }); err != nil || !c.Approve {
		t.Fatalf("answering: %+v %v", c, err)
	}
	if a := <-out; !a.Allow || a.Outcome != "approved" || a.By != "link sent to hook" {
		t.Fatalf("approval %+v", a)
	}
	for _, l := range []string{n.Links.Approve, n.Links.Deny} {
		if _, err := s.AnswerLink(token(l), func(Claims) string { return "again" }); !errors.Is(err, ErrLinkUsed) {
			t.Errorf("a spent link: %v", err)
		}
	}
}

// TestNotifierFailures: a receiver that keeps failing, or hangs, is tried
// Attempts times and the call is then denied on the record; a failure of
// one notifier of two leaves the call waiting for the other's person.
func TestNotifierFailures(t *testing.T) {
	t.Parallel()
	backoff = func(int) time.Duration { return 10 * time.Millisecond }
	for _, c := range []struct {
		name   string
		status func(int) int
		want   string
	}{
		{"always 500", func(int) int { return 500 }, "3 attempts failed; last: the receiver answered 500 Internal Server Error"},
		{"hangs", func(int) int { return 0 }, "3 attempts failed; last: context deadline exceeded"},
		{"redirects", func(int) int { return 302 }, "3 attempts failed; last: the receiver answered 302 Found"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := newReceiver(t, c.status)
			s := notifyStore(&Notifier{Name: "hook", Kind: KindWebhook, URL: r.srv.URL, Timeout: 100 * time.Millisecond, Attempts: 3})
			a := s.Await(context.Background(), sessionCall("f1"), asking, time.Minute)
			if a.Allow || a.Outcome != "unnotified" || !strings.Contains(a.Reason, "hook: "+c.want) {
				t.Fatalf("approval %+v", a)
			}
			if n := len(r.got()); n != 3 {
				t.Errorf("%d attempts, want 3", n)
			}
		})
	}
	t.Run("one of two fails", func(t *testing.T) {
		t.Parallel()
		bad := newReceiver(t, func(int) int { return 500 })
		good := newReceiver(t, nil)
		s := notifyStore(&Notifier{Name: "bad", Kind: KindWebhook, URL: bad.srv.URL, Timeout: time.Second, Attempts: 2},
			&Notifier{Name: "good", Kind: KindSlack, URL: good.srv.URL, Timeout: time.Second, Attempts: 1})
		a := s.Await(context.Background(), sessionCall("f2"), asking, 300*time.Millisecond)
		if a.Outcome != "timeout" || len(good.got()) != 1 {
			t.Fatalf("approval %+v after %d notices", a, len(good.got()))
		}
	})
}

// TestSlackMessage: the message carries the call and its labels as
// blocks with two buttons, and nothing the agent wrote becomes a link or
// a mention.
func TestSlackMessage(t *testing.T) {
	t.Parallel()
	r := newReceiver(t, nil)
	s := notifyStore(&Notifier{Name: "chat", Kind: KindSlack, URL: r.srv.URL, Timeout: time.Second, Attempts: 1})
	c := sessionCall("s1")
	c.Command = "curl <https://evil.example|click here> <!channel> & \x1b[2J"
	go s.Await(context.Background(), c, asking, 500*time.Millisecond)
	var body []byte
	for range 400 {
		if b := r.got(); len(b) > 0 {
			body = b[0]
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	var msg struct {
		Text   string           `json:"text"`
		Blocks []map[string]any `json:"blocks"`
	}
	if err := json.Unmarshal(body, &msg); err != nil {
		t.Fatal(err)
	}
	doc := string(body)
	for _, want := range []string{`"type":"actions"`, `"style":"primary"`, `"style":"danger"`, "https://gw.example" + LinkPath,
		"*private* ← read /workspace/.env", "&lt;!channel&gt;", "&lt;https://evil.example|click here&gt;", `&amp; \\x1b[2J`} {
		if !strings.Contains(doc, want) {
			t.Errorf("the message lacks %s:\n%s", want, doc)
		}
	}
	for _, bad := range []string{"<!channel>", "<https://evil", "\x1b"} {
		if strings.Contains(doc, bad) {
			t.Errorf("the message carries %q", bad)
		}
	}
	if !strings.Contains(msg.Text, "agent a asks to run exec") {
		t.Errorf("fallback text %q", msg.Text)
	}
}
