// Package gatewaycmd holds the commands that run the gateway's own code in
// the process or read and write its configuration and state directly —
// init, serve, config, policy, audit, sandbox, tools, usage, agent, hooks,
// secrets — and toolgate-gateway's command tree: toolgate's commands plus
// these. It links what they need (CEL, the Docker and Kubernetes clients,
// the MCP SDK, SQLite, pgx, Prometheus), so toolgate itself does not and a
// client command starts without their initialisers; toolgate runs
// toolgate-gateway for these commands (cli.GatewayBinary).
package gatewaycmd

//go:generate go run ./gendocs ../../../docs/cli

import (
	"io"

	"github.com/spf13/cobra"
	"github.com/toolgate/toolgate/internal/cli"
)

// NewRootCmd returns toolgate-gateway's tree: every toolgate command.
func NewRootCmd() *cobra.Command { return cli.NewRootWith(commands) }

// Main runs the command line args with NewRootCmd's tree and returns the
// process exit status.
func Main(args []string, stderr io.Writer) int { return cli.Run(NewRootCmd(), args, stderr) }

func commands(g *cli.Globals) []*cobra.Command {
	return []*cobra.Command{
		newInitCmd(g), newServeCmd(g), newConfigCmd(g), newPolicyCmd(g), newAuditCmd(g),
		newSandboxCmd(g), newToolsCmd(g), newUsageCmd(g), newAgentCmd(g),
		newHooksCmd(g), newSecretsCmd(g), newTokenCmd(g), newIDCmd(g), newWitnessCmd(g),
	}
}
