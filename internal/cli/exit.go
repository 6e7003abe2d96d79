// Package cli holds the toolgate command tree: each command parses flags,
// calls the internal packages and prints. It holds the commands that talk
// to a running gateway or edit the home's files and links none of the
// gateway's heavy dependencies; the commands that run the gateway's own
// code are in gatewaycmd, linked only into toolgate-gateway (gateway.go).
// It is a package (not cmd/toolgate-cli) so the CLI reference in docs/cli can
// be generated from the commands.
package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/internal/proto/api"
)

// Exit codes beyond a tool's own, in the spirit of `docker run`.
const (
	ExitError  = 125 // toolgate itself failed (daemon down, bad flags, I/O)
	ExitDenied = 126 // the gateway refused the call
)

// ExitCode carries a tool's exit status out of a command.
type ExitCode int

func (e ExitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// Main runs the command line args with toolgate's tree (as much of it as
// they need: rootFor) and returns the process exit status, writing a
// failure to stderr.
func Main(args []string, stderr io.Writer) int { return Run(rootFor(args), args, stderr) }

// Run runs the command line args with the tree root and returns the
// process exit status, writing a failure to stderr.
func Run(root *cobra.Command, args []string, stderr io.Writer) int {
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return 0
	}
	var code ExitCode
	if errors.As(err, &code) {
		return int(code)
	}
	fmt.Fprintln(stderr, "toolgate:", err)
	var we *api.Error
	if errors.As(err, &we) && (we.Code == "denied" || we.Code == "unauthorized") {
		return ExitDenied
	}
	return ExitError
}
