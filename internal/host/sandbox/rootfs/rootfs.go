// Package rootfs builds the root filesystems of sandbox images, offline
// from what the host already has or reaches (its compiler and busybox-static,
// Debian's archive, the npm registry), one profile per kind of image. A profile is a
// file that registers itself; the backend imports the tar it writes.
//
// Whatever the profile, the image carries only what the agent's programs
// need: toolgate itself mounts everything of its own (the static client,
// the launchers, the agent socket, the workspace, tmpfs /tmp and
// /run/toolgate), so any Linux image, glibc or musl, works as well.
package rootfs

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// Profile makes the root filesystem of one kind of sandbox image.
type Profile interface {
	// Name is what `toolgate sandbox image --profile NAME` takes.
	Name() string
	// Summary says in a line what the image holds.
	Summary() string
	// Tag is the image tag the profile builds by default.
	Tag() string
	// Version names everything the root filesystem holds (base system,
	// package list, tool versions): a changed version means a rebuild.
	Version() string
	// Env is what the image's environment adds to toolgate's PATH (KEY=VAL).
	Env() []string
	// Write writes the root filesystem to w as a tar stream.
	Write(ctx context.Context, env Env, w io.Writer) error
}

// Env is what a profile may use while it builds.
type Env struct {
	// Cache is a directory for downloads and intermediate trees, kept
	// between builds keyed by version; empty: CacheDir().
	Cache string
	// Log gets progress lines; nil discards them.
	Log io.Writer
}

func (e Env) cache() string {
	if e.Cache != "" {
		return e.Cache
	}
	return CacheDir()
}

func (e Env) logf(format string, args ...any) {
	if e.Log != nil {
		fmt.Fprintf(e.Log, format+"\n", args...)
	}
}

// CacheDir is $TOOLGATE_IMAGE_CACHE, else toolgate-image-cache in the
// temporary directory: a cold build downloads, a warm one reads from here.
func CacheDir() string {
	if d := os.Getenv("TOOLGATE_IMAGE_CACHE"); d != "" {
		return d
	}
	return filepath.Join(os.TempDir(), "toolgate-image-cache")
}

var (
	mu       sync.Mutex
	profiles = map[string]Profile{}
)

// Register adds a profile; each profile's file calls it from init.
func Register(p Profile) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := profiles[p.Name()]; dup {
		panic("rootfs: profile " + p.Name() + " registered twice")
	}
	profiles[p.Name()] = p
}

// Lookup returns the profile called name.
func Lookup(name string) (Profile, error) {
	mu.Lock()
	defer mu.Unlock()
	if p, ok := profiles[name]; ok {
		return p, nil
	}
	return nil, fmt.Errorf("no image profile %q (there are: %s)", name, strings.Join(slices.Sorted(maps.Keys(profiles)), ", "))
}

// Profiles returns every registered profile, by name.
func Profiles() []Profile {
	mu.Lock()
	defer mu.Unlock()
	var out []Profile
	for _, name := range slices.Sorted(maps.Keys(profiles)) {
		out = append(out, profiles[name])
	}
	return out
}
