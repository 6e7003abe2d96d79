package docker

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/moby/client"
)

func TestNewUnreachable(t *testing.T) {
	host := "unix://" + filepath.Join(t.TempDir(), "no.sock")
	_, err := New(context.Background(), Options{Host: host})
	if err == nil || !strings.Contains(err.Error(), "cannot reach the Docker Engine at "+host) || !strings.Contains(err.Error(), "is dockerd running?") {
		t.Fatalf("got %v", err)
	}
}

func TestNegotiatedVersion(t *testing.T) {
	needDocker(t)
	ping, err := testMgr.Client().Ping(context.Background(), client.PingOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The Engine here (1.41) is older than the client's maximum: the client
	// must have come down to exactly the Engine's version.
	if got := testMgr.APIVersion(); got != ping.APIVersion {
		t.Fatalf("client speaks %s, engine %s", got, ping.APIVersion)
	}
}
