package api

import (
	"testing"
	"time"
)

func TestIDTime(t *testing.T) {
	before := time.Now()
	at, ok := IDTime(NewID())
	if !ok || at.Before(before) || at.After(time.Now()) {
		t.Fatalf("IDTime(NewID()) = %v, %v; made between %v and now", at, ok, before)
	}
	for _, bad := range []string{"", "c1", "zz", "0123456789abcdef0123456789abcde"} {
		if _, ok := IDTime(bad); ok {
			t.Errorf("IDTime(%q) is ok", bad)
		}
	}
}
