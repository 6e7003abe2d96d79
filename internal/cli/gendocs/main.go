// Command gendocs writes the CLI reference (docs/cli) from the command
// tree: `go generate ./internal/cli`.
package main

import (
	"fmt"
	"os"

	"github.com/toolgate/toolgate/internal/cli"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gendocs DIR")
		os.Exit(2)
	}
	if err := cli.WriteDocs(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "gendocs:", err)
		os.Exit(1)
	}
}
