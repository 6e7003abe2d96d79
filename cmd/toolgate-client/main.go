// Command toolgate-client runs inside every sandbox (mounted at
// /tools/toolgate-client). Build it static: CGO_ENABLED=0.
package main

import (
	"os"

	"github.com/toolgate/toolgate/internal/client"
)

func main() { os.Exit(client.Main(os.Args[1:])) }
