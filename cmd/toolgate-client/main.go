// Command toolgate-client runs inside every sandbox (mounted at
// /tools/toolgate-client) and, through the /tools/bin/NAME symlinks to it,
// is the launcher of every plugin tool. Build it static: CGO_ENABLED=0.
package main

import (
	"os"

	"github.com/toolgate/toolgate/internal/guest"
)

func main() { os.Exit(guest.MultiCall(os.Args)) }
