package sandbox

import (
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"
)

type testBox struct {
	agent string
	h     Handle[string]
}

func newTestRegistry(made *[]string) *Registry[testBox] {
	return NewRegistry(func(agent string) *testBox {
		*made = append(*made, agent)
		return &testBox{agent: agent}
	})
}

func TestHandle(t *testing.T) {
	var h Handle[string]
	if h.Stale() || h.Ref() != "" {
		t.Fatalf("zero handle: stale %v, ref %q", h.Stale(), h.Ref())
	}
	h.MarkStale()
	if !h.Stale() {
		t.Fatal("MarkStale: not stale")
	}
	spec := AgentSpec{Agent: "a", Image: "img"}
	h.Set("c1", spec)
	if ref, got := h.Current(); h.Stale() || ref != "c1" || !got.SameSandbox(spec) {
		t.Fatalf("after Set: stale %v, ref %q, spec %+v", h.Stale(), ref, got)
	}
}

func TestRegistryRegister(t *testing.T) {
	var made []string
	r := newTestRegistry(&made)
	b1, l1 := r.Register(AgentSpec{Agent: "a", Image: "one"})
	b2, l2 := r.Register(AgentSpec{Agent: "a", Image: "two"})
	if b1 != b2 || l1 != l2 || b1.agent != "a" {
		t.Fatalf("a second Register gave another handle or lock: %p %p, %p %p", b1, b2, l1, l2)
	}
	if s, ok := r.Spec("a"); !ok || s.Image != "two" {
		t.Fatalf("Spec after two Registers = %+v, %v; want the second", s, ok)
	}
	if b, s, ok := r.Lookup("a"); b != b1 || !ok || s.Image != "two" {
		t.Fatalf("Lookup = %p %+v %v", b, s, ok)
	}
	if b, _, ok := r.Lookup("nobody"); b != nil || ok {
		t.Fatalf("Lookup of an unknown agent = %p, %v", b, ok)
	}
	if !slices.Equal(made, []string{"a"}) {
		t.Fatalf("handles made: %v", made)
	}
}

func TestRegistryConfigure(t *testing.T) {
	var made []string
	r := newTestRegistry(&made)
	old, _ := r.Register(AgentSpec{Agent: "kept", Image: "one"})
	r.Register(AgentSpec{Agent: "gone", Image: "one"})
	r.Register(AgentSpec{Agent: "changed", Image: "one"})

	seen := map[string]bool{}
	boom := errors.New("boom")
	err := r.Configure([]AgentSpec{
		{Agent: "kept", Image: "one", Tools: []string{"git"}}, // tools are no new sandbox
		{Agent: "changed", Image: "two"},
		{Agent: "new", Image: "one"},
	}, func(b *testBox, s AgentSpec, changed bool) error {
		if b == nil || b.agent != s.Agent {
			t.Errorf("handle %+v for %s", b, s.Agent)
		}
		seen[s.Agent] = changed
		if s.Agent == "new" {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Configure = %v, want the callback's error", err)
	}
	if want := map[string]bool{"kept": false, "changed": true, "new": false}; !maps.Equal(seen, want) {
		t.Fatalf("changed by agent = %v, want %v", seen, want)
	}
	if _, ok := r.Spec("gone"); ok {
		t.Fatal("an agent left out of the configuration is still configured")
	}
	if b, _, _ := r.Lookup("kept"); b != old {
		t.Fatal("a reload replaced a handle: calls holding the old one would lose it")
	}
	if b, _, _ := r.Lookup("gone"); b == nil {
		t.Fatal("the handle of an agent that left is lost: a call holding it could not be told apart")
	}
}

func TestRegistryStatus(t *testing.T) {
	var made []string
	r := newTestRegistry(&made)
	if err := r.Configure([]AgentSpec{{Agent: "b"}, {Agent: "c"}}, func(*testBox, AgentSpec, bool) error { return nil }); err != nil {
		t.Fatal(err)
	}
	r.Register(AgentSpec{Agent: "a"})
	var got []string
	st, err := r.Status(func(agent string, b *testBox) (Status, error) {
		if b == nil || b.agent != agent {
			t.Errorf("handle %+v for %s", b, agent)
		}
		// The registry's lock is not held: one may ask it.
		if _, ok := r.Spec(agent); !ok {
			t.Errorf("Spec(%s) inside Status: not configured", agent)
		}
		got = append(got, agent)
		return Status{Agent: agent, State: "running"}, nil
	})
	if err != nil || len(st) != 3 || !slices.Equal(got, []string{"a", "b", "c"}) || st[2].Agent != "c" || len(made) != 3 {
		t.Fatalf("Status = %+v, %v; asked %v", st, err, got)
	}

	boom := errors.New("boom")
	st, err = r.Status(func(agent string, _ *testBox) (Status, error) {
		if agent == "b" {
			return Status{}, boom
		}
		return Status{Agent: agent}, nil
	})
	if !errors.Is(err, boom) || st != nil {
		t.Fatalf("Status with a failing agent = %+v, %v", st, err)
	}
}

// TestRegistryConcurrent is for -race: handles and specs change under
// calls reading them.
func TestRegistryConcurrent(t *testing.T) {
	var made []string
	r := newTestRegistry(&made)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 100 {
				spec := AgentSpec{Agent: "a", Image: string(rune('a' + (i+j)%3))}
				b, lock := r.Register(spec)
				lock.Lock()
				b.h.Set("c", spec)
				lock.Unlock()
				b.h.MarkStale()
				_, _ = b.h.Current()
				_, _ = r.Status(func(a string, b *testBox) (Status, error) { return Status{Agent: a}, nil })
				_ = r.Configure([]AgentSpec{spec}, func(b *testBox, _ AgentSpec, changed bool) error {
					if changed {
						b.h.MarkStale()
					}
					return nil
				})
			}
		}()
	}
	wg.Wait()
	if len(made) != 1 {
		t.Fatalf("%d handles made for one agent", len(made))
	}
}
