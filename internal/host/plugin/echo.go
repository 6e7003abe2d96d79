package plugin

import (
	"context"
	"io"
	"slices"
	"strings"
)

// Named so its launcher shadows no command of an image: a tool called echo
// would hide the shell's echo behind /tools/bin on PATH.
func init() { RegisterBuiltin("toolgate-echo", Echo) }

// Echo writes its argv joined by spaces and a newline to stdout, then, if
// one of its arguments is "-", copies stdin. It always exits 0; tests and
// benchmarks use it to measure the path, not the handler.
func Echo(_ context.Context, inv *Invocation) (int, error) {
	if _, err := io.WriteString(inv.Stdout, strings.Join(inv.Argv, " ")+"\n"); err != nil {
		return 0, err
	}
	if inv.Stdin != nil && slices.Contains(inv.Argv, "-") {
		if _, err := io.Copy(inv.Stdout, inv.Stdin); err != nil {
			return 0, err
		}
	}
	return 0, nil
}
