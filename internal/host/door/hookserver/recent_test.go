package hookserver

import (
	"fmt"
	"testing"
)

// TestRecentPerAgent: each agent remembers its own last n ids, so a flood
// from one agent does not evict another's.
func TestRecentPerAgent(t *testing.T) {
	r := newRecent(3)
	r.add("a", "e1", 0)
	for i := range 10 {
		r.add("b", fmt.Sprint("flood", i), 0)
	}
	if !r.has("a", "e1") {
		t.Fatal("agent b's flood evicted agent a's id")
	}
	if r.has("b", "flood0") || !r.has("b", "flood9") || !r.has("b", "flood7") {
		t.Fatal("agent b should keep exactly its last 3 ids")
	}
	if r.has("b", "e1") {
		t.Fatal("an id of agent a counted for agent b")
	}
	r.add("a", "e1", 0) // again: no second slot
	r.add("a", "e2", 0)
	r.add("a", "e3", 0)
	if !r.has("a", "e1") {
		t.Fatal("re-adding an id took a slot")
	}
}
