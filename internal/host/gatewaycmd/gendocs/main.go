// Command gendocs writes the CLI reference (docs/cli) from the whole
// command tree (toolgate-gateway's, which toolgate's stands in for):
// `go generate ./internal/host/gatewaycmd`.
package main

import (
	"fmt"
	"os"

	"github.com/toolgate/toolgate/internal/cli"
	"github.com/toolgate/toolgate/internal/host/gatewaycmd"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gendocs DIR")
		os.Exit(2)
	}
	if err := cli.WriteDocs(os.Args[1], gatewaycmd.NewRootCmd()); err != nil {
		fmt.Fprintln(os.Stderr, "gendocs:", err)
		os.Exit(1)
	}
}
