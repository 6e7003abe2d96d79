// Command toolgate-launch is the launcher behind every /tools/bin/NAME in a
// sandbox: a static binary that links only what a tool call needs, so the
// process it costs per call starts fast. toolgate-client can do the same
// (`toolgate-client call NAME`), with more to load.
package main

import (
	"os"
	"path/filepath"

	"github.com/toolgate/toolgate/internal/launcher"
)

func main() { os.Exit(launcher.Launch(filepath.Base(os.Args[0]), os.Args[1:])) }
