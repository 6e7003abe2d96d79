package systemtest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv/timing"
)

// BenchmarkLiveFeed: from the start of a call to its entry arriving on the
// dashboard's live feed — the stream a browser follows (GET
// /ui/feed/events) — through the daemon's own index follower and feed
// poll; p50/p99. The call is a host plugin call, so a sandbox's exec time
// is not in the figure. TestDashboardInBrowser logs the same path into a
// real Chromium once.
//
//	go test ./internal/host/systemtest -run '^$' -bench LiveFeed -benchtime 100x
func BenchmarkLiveFeed(b *testing.B) {
	addr := freePort(b)
	e := NewWith(b, Extra{
		Gateway:   "  listen: " + addr + "\n",
		Top:       "plugins:\n  echo: {kind: builtin, builtin: toolgate-echo}\n",
		AgentKeys: "    tools: [echo]\n",
	}, "feed")
	a := e.Agents[0]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/ui/feed/events?agent="+a, nil)
	req.Header.Set("Authorization", "Bearer "+e.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("live feed: %s", resp.Status)
	}
	var mu sync.Mutex
	arrived := map[string]chan struct{}{}
	wait := func(id string) chan struct{} { // mu held
		ch, ok := arrived[id]
		if !ok {
			ch = make(chan struct{})
			arrived[id] = ch
		}
		return ch
	}
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var r struct{ ID, Phase string }
			if json.Unmarshal([]byte(data), &r) != nil || r.Phase != "decision" {
				continue
			}
			mu.Lock()
			close(wait(r.ID))
			mu.Unlock()
		}
	}()
	timing.Run(b, func() error {
		hr, _ := http.NewRequest("POST", "http://"+addr+"/v1/agents/"+a+"/tools/echo/call", strings.NewReader(`{"argv":["hi"]}`))
		hr.Header.Set("Authorization", "Bearer "+e.Token)
		res, err := http.DefaultClient.Do(hr)
		if err != nil {
			return err
		}
		res.Body.Close()
		id := res.Header.Get("Toolgate-Call-Id")
		if res.StatusCode != http.StatusOK || id == "" {
			return fmt.Errorf("call: %s, id %q", res.Status, id)
		}
		mu.Lock()
		ch := wait(id)
		mu.Unlock()
		select {
		case <-ch:
			return nil
		case <-time.After(time.Minute): // a guard against a hang, not a measure
			return fmt.Errorf("call %s never reached the live feed", id)
		}
	})
}
