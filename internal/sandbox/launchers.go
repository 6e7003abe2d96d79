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
// the sandbox), which calls the tool it is named after. Anything else in dir is removed, so a tool taken
// from the agent disappears from its PATH. Each link is replaced by rename,
// so a sandbox never sees a missing launcher for a tool it keeps.
func WriteLaunchers(dir string, tools []string, target string) error {
	want := make(map[string]bool, len(tools))
	for _, t := range tools {
		if !ValidToolName(t) {
			return fmt.Errorf("launchers: invalid tool name %q", t)
		}
		want[t] = true
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("launchers: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("launchers: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if want[e.Name()] {
			if got, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && got == target {
				delete(want, e.Name()) // already right
				continue
			}
		}
		if !want[e.Name()] {
			errs = append(errs, os.RemoveAll(filepath.Join(dir, e.Name())))
		}
	}
	for t := range want {
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
