package hooks

import (
	"fmt"
	"path"
	"strings"
)

// hookSkippingFlags make Claude Code ignore every hook in its settings
// (reference §1): a gated agent must never be started with them.
var hookSkippingFlags = []string{"--bare", "--safe-mode"}

// CheckLaunch refuses an argv that starts Claude Code with a flag that
// skips hooks. claude may come after a wrapper (env, timeout, npx …), so
// every word from the first one naming it (the claude binary, or the npm
// package @anthropic-ai/claude-code that npx runs) on is checked; flags
// given as --flag=value count too.
func CheckLaunch(argv []string) error {
	at := -1
	for i, a := range argv {
		if b := path.Base(a); b == "claude" || b == "claude-code" || strings.HasPrefix(b, "claude-code@") {
			at = i
			break
		}
	}
	if at < 0 {
		return nil
	}
	for _, a := range argv[at+1:] {
		if a == "--" {
			break
		}
		name, _, _ := strings.Cut(a, "=")
		for _, f := range hookSkippingFlags {
			if name == f {
				return fmt.Errorf("refusing to run claude with %s: it skips the hooks that gate and record its tools", f)
			}
		}
	}
	return nil
}
