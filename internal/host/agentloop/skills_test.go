package agentloop

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/host/door/mcp"
	"github.com/toolgate/toolgate/internal/host/door/modeldoor"
	"github.com/toolgate/toolgate/internal/host/door/modeldoor/scripted"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/model"
)

// scriptModel plays a script in process, keeping the last request.
type scriptModel struct {
	s    *scripted.Script
	last []byte
}

func (m *scriptModel) Send(ctx context.Context, r *modeldoor.Request) (*http.Response, error) {
	m.last = r.Body
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.Path, bytes.NewReader(r.Body))
	if err != nil {
		return nil, err
	}
	return m.s.Do(req)
}

// Skills the MCP door lists to the agent are named in the system prompt
// and read with read_skill; another agent's skill is not there to read.
func TestSkillsOffered(t *testing.T) {
	home := t.TempDir()
	write := func(dir, name, body string) {
		p := filepath.Join(dir, name, mcp.SkillFile)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("---\nname: "+name+"\ndescription: how to "+name+"\n---\n"+body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(home, "skills"), "deploy", "say the magic words")
	write(filepath.Join(home, "agents", "other", "skills"), "hidden", "not for demo")
	door := mcp.New(gateway.New(gateway.Options{}, benchSnapshot()), mcp.Options{Home: home})
	defer door.Close()

	s, err := scripted.Parse([]byte(`turns:
  - say: reading
    tools:
      - {name: read_skill, input: {uri: "skill://global/deploy"}}
      - {name: read_skill, input: {uri: "skill://other/hidden"}}
  - expect: magic words
    say: done
`))
	if err != nil {
		t.Fatal(err)
	}
	m := &scriptModel{s: s}
	var events []Event
	run := &Run{Model: m, Gateway: instantGateway{snap: benchSnapshot()}, Skills: door, Store: NewStore(t.TempDir()),
		Visible: []string{"read"}, Emit: func(e Event) { events = append(events, e) }}
	sess := &Session{ID: gateway.NewID(), Agent: "demo", Provider: "p", API: model.Anthropic, Model: scripted.Model}
	if stop := run.Do(context.Background(), sess, "task"); stop.Stop != StopDone || sess.Messages[len(sess.Messages)-1].Text != "done" {
		t.Fatalf("stop %+v, last %+v", stop, sess.Messages[len(sess.Messages)-1])
	}
	body := string(m.last)
	if !strings.Contains(body, "skill://global/deploy: how to deploy") || strings.Contains(body, "skill://other/hidden: ") || !strings.Contains(body, `"name":"read_skill"`) {
		t.Fatalf("request: %s", body)
	}
	res := sess.Messages[2].Results
	if len(res) != 2 || res[0].IsError || !strings.Contains(res[0].Content, "magic words") || !res[1].IsError || strings.Contains(res[1].Content, "not for demo") {
		t.Fatalf("results: %+v", res)
	}
}
