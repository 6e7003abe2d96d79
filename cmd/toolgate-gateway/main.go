// Command toolgate-gateway runs the commands of toolgate that run the
// gateway's own code (serve, policy, audit …); toolgate, installed beside
// it, hands those commands to it. The commands live in
// internal/host/gatewaycmd.
package main

import (
	"os"

	"github.com/toolgate/toolgate/internal/host/gatewaycmd"
)

func main() {
	os.Exit(gatewaycmd.Main(os.Args[1:], os.Stderr))
}
