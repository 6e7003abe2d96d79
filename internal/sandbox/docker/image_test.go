package docker

import (
	"strings"
	"testing"
)

func TestDrainProgress(t *testing.T) {
	if err := drainProgress(strings.NewReader(`{"status":"ok"}` + "\n" + `{"status":"sha256:abc"}`)); err != nil {
		t.Fatal(err)
	}
	if err := drainProgress(strings.NewReader(`{"status":"x"}{"error":"disk full"}`)); err == nil || err.Error() != "disk full" {
		t.Fatalf("got %v", err)
	}
}
