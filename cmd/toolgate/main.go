// Command toolgate is the gateway daemon and its CLI. Commands parse flags,
// call internal packages and print; the logic lives under internal/.
package main

import (
	"errors"
	"fmt"
	"os"

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

func main() {
	err := newRootCmd().Execute()
	if err == nil {
		return
	}
	var code exitCode
	if errors.As(err, &code) {
		os.Exit(int(code))
	}
	fmt.Fprintln(os.Stderr, "toolgate:", err)
	var we *wire.Error
	if errors.As(err, &we) && (we.Code == "denied" || we.Code == "unauthorized") {
		os.Exit(exitDenied)
	}
	os.Exit(exitError)
}
