package daemon

import (
	"context"
	"os"
	"path/filepath"

	"github.com/toolgate/toolgate/internal/host/sandbox/docker"
	"github.com/toolgate/toolgate/internal/host/sandbox/kube"
	"github.com/toolgate/toolgate/internal/host/sandbox/rootfs"
)

// The sandbox images (`toolgate sandbox image`) are made here, beside the
// backends they are for, so that the gateway's commands reach the
// backends through this package only.

// BuildImage builds the image of profile p into the Docker Engine as tag;
// built is false when the image there is current and force is not set.
func BuildImage(ctx context.Context, tag string, p rootfs.Profile, env rootfs.Env, force bool) (built bool, err error) {
	mgr, err := docker.New(ctx, docker.Options{})
	if err != nil {
		return false, err
	}
	defer mgr.Close()
	return mgr.BuildImage(ctx, tag, p, env, force)
}

// WriteOCI writes the image of profile p for the kubernetes backend to path
// as an OCI archive, with toolgate-client and toolgate-launch found beside
// the running program inside (a pod cannot mount them from the host);
// gateway: the gateway's own image, the running program in it too.
func WriteOCI(ctx context.Context, path, tag string, p rootfs.Profile, env rootfs.Env, gateway bool) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	dir := filepath.Dir(exe)
	bins := kube.Binaries{Client: filepath.Join(dir, "toolgate-client"), Launcher: filepath.Join(dir, "toolgate-launch")}
	if gateway {
		bins.Gateway = exe
	}
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if err := kube.WriteImage(ctx, f, tag, p, env, bins); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
