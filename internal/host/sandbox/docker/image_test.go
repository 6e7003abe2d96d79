package docker

import (
	"context"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/host/sandbox/rootfs"
)

func TestDrainProgress(t *testing.T) {
	if err := drainProgress(strings.NewReader(`{"status":"ok"}` + "\n" + `{"status":"sha256:abc"}`)); err != nil {
		t.Fatal(err)
	}
	if err := drainProgress(strings.NewReader(`{"status":"x"}{"error":"disk full"}`)); err == nil || err.Error() != "disk full" {
		t.Fatalf("got %v", err)
	}
}

// failingProfile fails its build after writing part of the tar.
type failingProfile struct{ err error }

func (failingProfile) Name() string    { return "failing" }
func (failingProfile) Summary() string { return "fails" }
func (failingProfile) Tag() string     { return "toolgate/failing:test" }
func (failingProfile) Version() string { return "failing-1" }
func (failingProfile) Env() []string   { return nil }
func (f failingProfile) Write(_ context.Context, _ rootfs.Env, w io.Writer) error {
	if _, err := w.Write(make([]byte, 512)); err != nil {
		return err
	}
	return f.err
}

// A profile whose build fails is reported in its own words, not as the
// Engine client's failed request with the whole import URL around it.
func TestBuildImageSaysWhyTheProfileFailed(t *testing.T) {
	needDocker(t)
	why := errors.New("this host lacks musl-gcc")
	tag := "toolgate/failing:test-" + strconv.Itoa(os.Getpid())
	_, err := testMgr.BuildImage(context.Background(), tag, failingProfile{why}, rootfs.Env{}, true)
	if !errors.Is(err, why) || err.Error() != "building image "+tag+": this host lacks musl-gcc" {
		t.Fatalf("got %v", err)
	}
}
