// Package cli holds the toolgate command tree: each command parses flags,
// calls the internal packages and prints. It is a package (not cmd/toolgate)
// so the CLI reference in docs/cli can be generated from the commands.
package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/toolgate/toolgate/internal/wire"
)

// Exit codes beyond a tool's own, in the spirit of `docker run`.
const (
	exitError  = 125 // toolgate itself failed (daemon down, bad flags, I/O)
	exitDenied = 126 // the gateway refused the call
)

// exitCode carries a tool's exit status out of a command.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// Main runs the command line args and returns the process exit status,
// writing a failure to stderr.
func Main(args []string, stderr io.Writer) int {
	root := NewRootCmd()
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return 0
	}
	var code exitCode
	if errors.As(err, &code) {
		return int(code)
	}
	fmt.Fprintln(stderr, "toolgate:", err)
	var we *wire.Error
	if errors.As(err, &we) && (we.Code == "denied" || we.Code == "unauthorized") {
		return exitDenied
	}
	return exitError
}
