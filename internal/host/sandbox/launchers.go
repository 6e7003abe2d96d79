package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/toolgate/toolgate/internal/proto"
)

// ValidToolName reports whether name can be a launcher: a plain file name
// that is not the client itself.
func ValidToolName(name string) bool {
	return name != "" && name != "." && name != ".." && len(name) <= 128 &&
		filepath.Base(name) == name && name != filepath.Base(proto.ClientPath) && name != filepath.Base(proto.LauncherPath)
}

// WriteLaunchers makes dir (the host side of ToolsBinPath) hold exactly one
// launcher per tool: a symlink to target (LauncherPath or ClientPath inside
// the sandbox), which calls the tool it is named after. Beside them,
// toolgate-client itself, so `toolgate-client call NAME` works from PATH.
// Anything else in dir is removed, so a tool taken from the agent
// disappears from its PATH. Each link is replaced by rename, so a sandbox
// never sees a missing launcher for a tool it keeps.
func WriteLaunchers(dir string, tools []string, target string) error {
	want := make(map[string]string, len(tools)+1)
	for _, t := range tools {
		if !ValidToolName(t) {
			return fmt.Errorf("launchers: invalid tool name %q", t)
		}
		want[t] = target
	}
	want[filepath.Base(proto.ClientPath)] = proto.ClientPath
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("launchers: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("launchers: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if to, ok := want[e.Name()]; ok {
			if got, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && got == to {
				delete(want, e.Name()) // already right
			}
			continue // else replaced below
		}
		errs = append(errs, os.RemoveAll(filepath.Join(dir, e.Name())))
	}
	for t, target := range want {
		tmp := filepath.Join(dir, "."+t+".new")
		_ = os.Remove(tmp)
		if err := os.Symlink(target, tmp); err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, os.Rename(tmp, filepath.Join(dir, t)))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("launchers: %w", err)
	}
	return nil
}
