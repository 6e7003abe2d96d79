// A run is milliseconds, or a long `toolgate run` that only relays
// output: following a changed CPU limit is of no use to it, and the
// goroutine that would watch for one was started at every process start
// (CPU per `toolgate exec` -0.06 ms).
//go:debug updatemaxprocs=0

// Command toolgate-cli is the CLI; the commands live in internal/cli.
// People run it as toolgate, the C front (internal/guest/launcher), which makes
// most execs itself and hands it every other command line. The commands
// that run the gateway's own code (serve, policy, audit …) it hands in
// turn to toolgate-gateway, installed beside it.
package main

import (
	"os"

	"github.com/toolgate/toolgate/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stderr))
}
