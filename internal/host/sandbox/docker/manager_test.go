package docker

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/moby/client"
	"github.com/toolgate/toolgate/internal/host/sandbox"
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

func TestInstanceID(t *testing.T) {
	a := InstanceID("/home/u/.toolgate")
	if len(a) != 8 || !validInstance().MatchString(a) {
		t.Fatalf("InstanceID = %q", a)
	}
	if InstanceID("/home/u/.toolgate/") != a || InstanceID("/home/u/x/../.toolgate") != a {
		t.Fatal("InstanceID depends on the spelling of the path")
	}
	if InstanceID("/home/u/.demo-home") == a {
		t.Fatal("two homes share an instance id")
	}
	for _, bad := range []string{"-x", "a/b", "a b", strings.Repeat("x", 33)} {
		if _, err := New(context.Background(), Options{Instance: bad}); err == nil || !strings.Contains(err.Error(), "invalid instance") {
			t.Errorf("instance %q: %v", bad, err)
		}
	}
}

// Two gateways (homes) with an agent of the same name each get their own
// container and never touch the other's.
func TestInstancesIsolated(t *testing.T) {
	spec, sb := newAgent(t)
	ctx := context.Background()
	other, err := New(ctx, Options{Instance: testInstance() + "-other"})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	spec2 := spec
	spec2.Workspace = filepath.Join(t.TempDir(), "agent", "workspace")
	spec2.Memory = 200 << 20 // another spec: would recreate a shared container
	sb2, err := other.Ensure(ctx, spec2)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Remove(ctx, spec.Agent)
	if sb2.ContainerID() == sb.ContainerID() {
		t.Fatal("two instances share a container")
	}
	if _, err := testMgr.Ensure(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if !inspect(t, sb.ContainerID()).State.Running || !inspect(t, sb2.ContainerID()).State.Running {
		t.Fatal("one instance's Ensure replaced the other's container")
	}
	other.SetSpecs([]sandbox.AgentSpec{spec2})
	st, err := other.Status(ctx)
	if err != nil || len(st) != 1 || st[0].ContainerID != sb2.ContainerID() {
		t.Fatalf("status of the other instance: %+v %v", st, err)
	}
	if err := other.Remove(ctx, spec.Agent); err != nil {
		t.Fatal(err)
	}
	if !inspect(t, sb.ContainerID()).State.Running {
		t.Fatal("Remove in one instance removed the other's container")
	}
}

func TestCPULimitQuota(t *testing.T) {
	for _, tt := range []struct {
		cpus          float64
		period, quota int64
	}{
		{0, 0, 0}, // no limit
		{1, 10_000, 10_000},
		{0.5, 10_000, 5_000},
		{1.5, 10_000, 15_000},
		{0.3, 10_000, 3_000},
		{0.1, 10_000, 1_000},
		{1024, 10_000, 10_240_000},
		// The short period cannot hold these: Docker's own, as --cpus.
		{0.05, 100_000, 5_000},
		{0.01, 100_000, 1_000},
		{1.23456, 100_000, 123_456},
	} {
		r := cpuLimit(tt.cpus)
		if r.CPUPeriod != tt.period || r.CPUQuota != tt.quota || r.NanoCPUs != 0 {
			t.Errorf("cpus %g: period %d quota %d nano %d, want %d %d", tt.cpus, r.CPUPeriod, r.CPUQuota, r.NanoCPUs, tt.period, tt.quota)
		}
	}
}
