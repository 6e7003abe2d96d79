// Command toolgate is the CLI; the commands live in internal/cli. The
// commands that run the gateway's own code (serve, policy, audit …) it
// hands to toolgate-gateway, installed beside it.
package main

import (
	"os"

	"github.com/toolgate/toolgate/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stderr))
}
