package adminapi

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/auth"
	"github.com/toolgate/toolgate/internal/host/gateway"
)

// echoTool is a plugin tool that answers its arguments.
type echoTool struct{}

func (echoTool) Name() string                                   { return "echo" }
func (echoTool) Kind() gateway.Kind                             { return gateway.KindTool }
func (echoTool) Prepare(*gateway.Call, gateway.AgentInfo) error { return nil }
func (echoTool) Run(_ context.Context, call *gateway.Call, _ *gateway.RunEnv) (*gateway.Result, error) {
	return &gateway.Result{Output: json.RawMessage(call.Args)}, nil
}

type allowAll struct{}

func (allowAll) Decide(*gateway.Call) gateway.Decision {
	return gateway.Decision{Allow: true, Rule: "test"}
}

// refusalEnv is the admin API on a loopback TCP listener over a real
// gateway, audit log and token store.
type refusalEnv struct {
	gw       *gateway.Gateway
	aw       *audit.Writer
	dir      string
	srv      *httptest.Server
	adminTok string
}

func newRefusalEnv(t testing.TB, burst int, every time.Duration) *refusalEnv {
	t.Helper()
	home := t.TempDir()
	e := &refusalEnv{dir: filepath.Join(home, "logs")}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var err error
	if e.aw, err = audit.Open(e.dir, audit.Options{Logger: quiet}); err != nil {
		t.Fatal(err)
	}
	tokens, err := auth.OpenStore(filepath.Join(home, "tokens.json"))
	if err != nil {
		t.Fatal(err)
	}
	if e.adminTok, _, err = tokens.Create(auth.ScopeAdmin, "", 0); err != nil {
		t.Fatal(err)
	}
	e.gw = gateway.New(gateway.Options{Audit: e.aw, BoundArgs: audit.NewBounder(1024).Bound, Logger: quiet,
		RefusalBurst: burst, RefusalEvery: every}, &gateway.Snapshot{
		Agents:  map[string]gateway.AgentInfo{"demo": {Name: "demo"}},
		Tools:   map[string]gateway.Tool{"echo": echoTool{}},
		Decider: allowAll{},
	})
	e.srv = httptest.NewServer((&Server{Gateway: e.gw, Tokens: tokens}).Handler())
	t.Cleanup(func() {
		e.srv.Close()
		e.aw.Close()
	})
	return e
}

// entries flushes the open refusal counts and reads the whole audit log.
func (e *refusalEnv) entries(t *testing.T) []*gateway.Entry {
	t.Helper()
	if err := e.gw.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	var out []*gateway.Entry
	if err := audit.Query(e.dir, audit.Filter{}, func(en *gateway.Entry) error { out = append(out, en); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

func (e *refusalEnv) auditBytes(t *testing.T) int64 {
	t.Helper()
	fi, err := os.Stat(filepath.Join(e.dir, audit.CurrentFile))
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// A 401 for a 600 KB URL path (an agent name) is recorded with the path cut, not copied.
func TestRefusalOfHugePathIsBounded(t *testing.T) {
	t.Parallel()
	e := newRefusalEnv(t, 0, 0)
	path := "/v1/agents/" + strings.Repeat("p", 600<<10) + "/tools/echo/call"
	resp, err := http.Post(e.srv.URL+path, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("status %d, want 401", resp.StatusCode)
	}
	es := e.entries(t)
	if len(es) != 1 || es[0].Rule != "auth.token" || !strings.HasPrefix(es[0].Tool, "POST /v1/agents/ppp") || !strings.Contains(es[0].Tool, "…[cut ") {
		t.Fatalf("entries %+v", es)
	}
	n := e.auditBytes(t)
	if n > 4<<10 {
		t.Fatalf("one refused request wrote %d bytes to the audit log", n)
	}
	t.Logf("a refused 600 KB path: %d audit bytes", n)
}

// A flood of bad-token requests from one source costs O(intervals) entries
// that still count every refusal, and a valid call during the flood is
// answered and recorded.
func TestRefusalFloodFromOneSource(t *testing.T) {
	t.Parallel()
	const burst, every, flood, workers = 10, 100 * time.Millisecond, 10000, 4
	e := newRefusalEnv(t, burst, every)
	jobs := make(chan int, flood)
	for i := range flood {
		jobs <- i
	}
	close(jobs)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	valid := make(chan string, 1)
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				req, _ := http.NewRequest("GET", e.srv.URL+"/v1/agents", nil)
				req.Header.Set("Authorization", "Bearer not-a-token")
				resp, err := client.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusUnauthorized {
					t.Errorf("bad token answered %d", resp.StatusCode)
				}
				if i == flood/2 {
					valid <- e.validCall(t, client)
				}
			}
		}()
	}
	wg.Wait()
	intervals := int(time.Since(start)/every) + 2
	callID := <-valid

	es := e.entries(t)
	refused, n, found := 0, 0, false
	for _, en := range es {
		switch {
		case en.ID == callID:
			found = found || en.Decision == "allow"
		case en.Rule == gateway.RuleRefusalsCoalesced:
			c, _ := en.Detail["count"].(float64)
			refused += int(c)
			n++
		case en.Rule == "auth.token":
			refused++
			n++
		}
	}
	if !found {
		t.Fatalf("the valid call %s made during the flood is not on record", callID)
	}
	if refused != flood {
		t.Fatalf("the record counts %d refusals, %d were made", refused, flood)
	}
	if n > (burst+1)*intervals {
		t.Fatalf("%d entries for %d refusals over %d intervals, want at most %d", n, flood, intervals, (burst+1)*intervals)
	}
	t.Logf("%d refused requests over %d intervals: %d entries, %d audit bytes", flood, intervals, n, e.auditBytes(t))
}

// validCall makes an admin call and returns its audit id.
func (e *refusalEnv) validCall(t testing.TB, client *http.Client) string {
	req, _ := http.NewRequest("POST", e.srv.URL+"/v1/agents/demo/tools/echo/call", strings.NewReader(`{"x":1}`))
	req.Header.Set("Authorization", "Bearer "+e.adminTok)
	resp, err := client.Do(req)
	if err != nil {
		t.Error(err)
		return ""
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"x":1`) {
		t.Errorf("valid call during the flood: %d %s", resp.StatusCode, body)
	}
	return resp.Header.Get("Toolgate-Call-Id")
}

// BenchmarkCallDuringRefusalFlood: a valid admin call's latency alone and
// while 4 workers send bad-token requests as fast as they can, at the
// default refusal limits (refusals past the burst cost no audit write), with
// the refusals served per second.
func BenchmarkCallDuringRefusalFlood(b *testing.B) {
	for _, flood := range []bool{false, true} {
		b.Run(map[bool]string{false: "quiet", true: "flood"}[flood], func(b *testing.B) {
			e := newRefusalEnv(b, 0, 0)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var refused atomic.Int64
			if flood {
				for range 4 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						client := &http.Client{}
						for {
							select {
							case <-stop:
								return
							default:
							}
							req, _ := http.NewRequest("GET", e.srv.URL+"/v1/agents", nil)
							req.Header.Set("Authorization", "Bearer not-a-token")
							if resp, err := client.Do(req); err == nil {
								io.Copy(io.Discard, resp.Body)
								resp.Body.Close()
								refused.Add(1)
							}
						}
					}()
				}
			}
			client := &http.Client{}
			for b.Loop() {
				e.validCall(b, client)
			}
			b.StopTimer()
			close(stop)
			wg.Wait()
			b.ReportMetric(float64(refused.Load())/b.Elapsed().Seconds(), "refusals/s")
		})
	}
}
