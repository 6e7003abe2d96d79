// Package client is the in-sandbox toolgate client: the static binary
// mounted at /tools/toolgate-client. It is the sandbox's init and wraps
// every exec so a call's whole process tree can be timed out or killed.
package guest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"syscall"

	"github.com/toolgate/toolgate/internal/proto"
)

// Name is the client's own file name; invoked under any other name (a
// /tools/bin/NAME symlink) it is the launcher of tool NAME.
const Name = "toolgate-client"

// command is one subcommand; later issues add launchers and hooks here.
type command struct {
	summary string
	run     func(args []string, stderr io.Writer) int
}

var commands = map[string]command{
	"init": {"PID 1 of the sandbox: reap zombies, forward SIGTERM", cmdInit},
	"run":  {"run --timeout D --call ID [--cwd DIR] [--env K=V]... -- ARGV: run ARGV in its own process group", cmdRun},
	"kill": {"kill --call ID: SIGKILL the process group of a running call", cmdKill},
	"call": {"call NAME [ARGS]: call plugin tool NAME through the agent socket", cmdCall},
	"hook": {"hook pre-tool-use|post-tool-use: Claude Code gate and tap (stdin: hook input)", cmdHook},
}

// MultiCall dispatches on argv[0]: the launcher of the tool it is named
// after, or the subcommand in argv[1] when called as toolgate-client.
func MultiCall(argv []string) int {
	if len(argv) > 0 {
		if name := filepath.Base(argv[0]); name != Name {
			return launch(name, argv[1:])
		}
		argv = argv[1:]
	}
	return Main(argv)
}

func cmdCall(args []string, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "toolgate-client call: no tool named")
		return 2
	}
	return launch(args[0], args[1:])
}

// launch makes the call of tool name with args: it replaces this process
// with the launcher beside it (as proto.LauncherPath is beside
// proto.ClientPath in a sandbox, and as the build puts them), named name, so one program (the C launcher,
// internal/guest/launcher) speaks the launcher's side of the protocol; the pid,
// stdin, signals and exit status are the launcher's.
func launch(name string, args []string) int {
	exe, err := os.Executable()
	if err == nil {
		path := filepath.Join(filepath.Dir(exe), filepath.Base(proto.LauncherPath))
		err = syscall.Exec(path, append([]string{name}, args...), os.Environ())
		err = fmt.Errorf("no launcher at %s: %w", path, err)
	}
	fmt.Fprintf(os.Stderr, "toolgate: %s: %v\n", name, err)
	return proto.LaunchExitUnavailable
}

// Main runs the subcommand named by args[0] and returns the exit code.
func Main(args []string) int {
	if len(args) == 0 {
		usage(os.Stderr)
		return 2
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(os.Stderr, "toolgate-client: unknown command %q\n", args[0])
		usage(os.Stderr)
		return 2
	}
	return c.run(args[1:], os.Stderr)
}

func usage(w io.Writer) {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintln(w, "usage: toolgate-client COMMAND [ARGS]")
	for _, n := range names {
		fmt.Fprintf(w, "  %-9s %s\n", n, commands[n].summary)
	}
}

// unwrapOp drops a net.OpError's wrapping ("dial unix /path: …"), for
// messages people read that already name the socket.
func unwrapOp(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err
	}
	return err
}
