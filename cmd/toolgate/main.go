// Command toolgate is the gateway daemon and its CLI; the commands live in
// internal/cli.
package main

import (
	"os"

	"github.com/toolgate/toolgate/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stderr))
}
