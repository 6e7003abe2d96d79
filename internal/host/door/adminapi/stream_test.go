package adminapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/proto/api"
)

// countTool says "start" on its stdout, then counts its stdin: a command
// whose output begins before its input ends.
type countTool struct{}

func (countTool) Name() string                                   { return "count" }
func (countTool) Kind() gateway.Kind                             { return gateway.KindTool }
func (countTool) Prepare(*gateway.Call, gateway.AgentInfo) error { return nil }
func (countTool) Run(_ context.Context, _ *gateway.Call, env *gateway.RunEnv) (*gateway.Result, error) {
	if _, err := io.WriteString(env.IO.Stdout, "start\n"); err != nil {
		return nil, err
	}
	n, err := io.Copy(io.Discard, env.IO.Stdin)
	if err != nil {
		return nil, err
	}
	_, err = fmt.Fprintf(env.IO.Stdout, "%d\n", n)
	return &gateway.Result{}, err
}

// A call whose body is its stdin and whose output streams back is read
// while it is answered, from any HTTP/1.1 client: net/http's keeps the
// connection open, and for such a connection the server would drop up to
// 256 KiB of the unread body when the first frame goes out, unless the
// handler asks for full duplex.
func TestStreamedStdinFullDuplex(t *testing.T) {
	t.Parallel()
	e := newRefusalEnv(t, 10, 0)
	snap := e.gw.Snapshot()
	snap.Tools["count"] = countTool{}
	const size = 1 << 20
	req, err := http.NewRequest("POST", e.srv.URL+"/v1/agents/demo/tools/count/call", io.NopCloser(strings.NewReader(strings.Repeat("x", size))))
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = -1 // chunked, as a stream of unknown length goes
	req.Header.Set("Authorization", "Bearer "+e.adminTok)
	req.Header.Set("Content-Type", api.MediaRaw)
	req.Header.Set("Accept", api.MediaNDJSON)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var fr api.Frame
		if err := json.Unmarshal(sc.Bytes(), &fr); err != nil {
			t.Fatalf("frame %q: %v", sc.Bytes(), err)
		}
		out.Write(fr.Stdout)
		if fr.Error != nil {
			t.Fatalf("error frame: %+v", fr.Error)
		}
	}
	if want := fmt.Sprintf("start\n%d\n", size); out.String() != want {
		t.Fatalf("the tool saw %q, want %q", out.String(), want)
	}
}
