package systemtest

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// setPids rewrites the config with the agents' pids limit at n: a change
// of their sandbox spec, so the containers must be recreated.
func (e *Env) setPids(n int) {
	e.T.Helper()
	b, err := os.ReadFile(e.ConfigPath)
	if err != nil {
		e.T.Fatal(err)
	}
	cfg := string(b)
	if i := strings.Index(cfg, ", pids: "); i >= 0 {
		cfg = cfg[:i] + cfg[i+strings.Index(cfg[i:], "}"):]
	}
	cfg = strings.ReplaceAll(cfg, "execTimeout: 20s}", fmt.Sprintf("execTimeout: 20s, pids: %d}", n))
	if err := os.WriteFile(e.ConfigPath, []byte(cfg), 0o600); err != nil {
		e.T.Fatal(err)
	}
}

// TestReloadWithSpecChangeLetsCallsFinish: a reload that changes an agent's
// sandbox while an exec runs in it used to force-remove the container under
// the call. The call now completes, the answer says the recreate waits for
// idle, and the sandbox is recreated after it.
func TestReloadWithSpecChangeLetsCallsFinish(t *testing.T) {
	e := New(t, "drain")
	a := e.Agents[0]
	old := e.ContainerID(a)
	slow := make(chan error, 1)
	go func() {
		res, err := e.Call(a, "exec", map[string]any{"command": "touch started; sleep 2; echo finished"})
		if err == nil && Out(res, "stdout") != "finished\n" {
			err = fmt.Errorf("in-flight call: %+v", res)
		}
		slow <- err
	}()
	for {
		if res, err := e.Call(a, "exec", map[string]any{"command": "test -e started && echo y || true"}); err == nil && Out(res, "stdout") == "y\n" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.setPids(300)
	ans, err := e.Daemon.Reload(context.Background())
	if err != nil || !slices.Equal(ans.RecreatePending, []string{a}) {
		t.Fatalf("reload with a call in flight: %+v, %v; want the recreate of %s pending", ans, err, a)
	}
	if err := <-slow; err != nil {
		t.Fatalf("the call in flight during the reload: %v", err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		st, err := e.Admin.Agents(context.Background())
		if err == nil && st[0].State == "running" && st[0].Container != old {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sandbox was not recreated after the call finished: %+v %v", st, err)
		}
	}
	if _, err := e.Call(a, "exec", map[string]any{"argv": []string{"true"}}); err != nil {
		t.Fatalf("a call in the recreated sandbox: %v", err)
	}
}

// TestReloadStormKillsNoCall: 50 reloads, each changing the sandbox spec,
// while calls run without pause: no call fails. The numbers are logged.
func TestReloadStormKillsNoCall(t *testing.T) {
	e := New(t, "storm")
	a := e.Agents[0]
	stop := make(chan struct{})
	var calls, failed atomic.Int64
	var maxLat atomic.Int64
	var wg sync.WaitGroup
	for _, cmd := range []string{"echo ok", "echo ok", "sleep 0.5; echo ok"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				t0 := time.Now()
				res, err := e.Call(a, "exec", map[string]any{"command": cmd})
				if d := int64(time.Since(t0)); d > maxLat.Load() {
					maxLat.Store(d)
				}
				calls.Add(1)
				if err != nil || Out(res, "stdout") != "ok\n" {
					failed.Add(1)
					t.Errorf("a call during the storm: %v %+v", err, res)
				}
			}
		}()
	}
	pending := 0
	t0 := time.Now()
	for i := range 50 {
		e.setPids(300 + i%2)
		ans, err := e.Daemon.Reload(context.Background())
		if err != nil {
			t.Errorf("reload %d: %v", i, err)
		}
		pending += len(ans.RecreatePending)
		time.Sleep(100 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	t.Logf("reload storm: 50 reloads with spec changes in %s, %d answered recreate pending; %d calls, %d failed, slowest %s",
		time.Since(t0).Round(time.Millisecond), pending, calls.Load(), failed.Load(), time.Duration(maxLat.Load()).Round(time.Millisecond))
}
