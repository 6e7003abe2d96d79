package sandbox

import (
	"cmp"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Found is a toolgate sandbox a backend holds, of this home or another's
// (Backend.Find): what `toolgate sandbox ls` lists and prune removes.
type Found struct {
	Agent    string
	Instance string // the owning home's instance id
	// Home is the owning home's path, as the sandbox was labelled with it;
	// empty when it was made by a toolgate that did not say.
	Home    string
	ID      string // container id, pod UID
	Name    string // container or pod name
	Image   string
	State   string
	Runtime string // the runtime it runs under (a pod's RuntimeClass); empty: the backend's default
	// Workspace is the host directory mounted at /workspace, when the
	// backend has one there (Docker; a pod's is a claim).
	Workspace string
	Created   time.Time
}

// Where a found sandbox stands, seen from one home (Place).
const (
	PlaceHere       = "configured"     // an agent of this home
	PlaceUnused     = "not configured" // this home's, of an agent no longer in its config
	PlaceOtherHome  = "other home"     // another home's, which is still there
	PlaceLeftBehind = "left behind"    // another home's, whose home is gone
	PlaceUnknown    = "home unknown"   // another home's, which did not say where it is
)

// Place says where f stands for the home of instance, whose configured
// agents are configured.
func (f Found) Place(instance string, configured func(agent string) bool) string {
	switch {
	case f.Instance == instance && configured(f.Agent):
		return PlaceHere
	case f.Instance == instance:
		return PlaceUnused
	case f.Home == "":
		return PlaceUnknown
	case HomeGone(f.Home):
		return PlaceLeftBehind
	}
	return PlaceOtherHome
}

// Prunable reports whether prune removes a sandbox of place: this home's
// unconfigured agents' and gone homes' always, those of homes that did
// not say where they are only when asked (unknown).
func Prunable(place string, unknown bool) bool {
	return place == PlaceUnused || place == PlaceLeftBehind || (unknown && place == PlaceUnknown)
}

// HomeGone reports whether a toolgate home no longer is one: no
// config.yaml in it (the directory removed, or emptied). A home that
// cannot be looked at (permissions) is not gone.
func HomeGone(home string) bool {
	_, err := os.Stat(filepath.Join(home, "config.yaml"))
	return errors.Is(err, fs.ErrNotExist)
}

// SortFound orders sandboxes by home, then agent.
func SortFound(fs []Found) {
	slices.SortFunc(fs, func(a, b Found) int {
		return cmp.Or(cmp.Compare(a.Instance, b.Instance), cmp.Compare(a.Agent, b.Agent), cmp.Compare(a.Name, b.Name))
	})
}

// DirBytes is the size of the files under dir (a workspace), not following
// links; what cannot be read counts nothing. -1: there is no dir.
func DirBytes(dir string) int64 {
	if _, err := os.Lstat(dir); err != nil {
		return -1
	}
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
