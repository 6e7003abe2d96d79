package gatewaycmd

import (
	"log/slog"
	"os"

	"github.com/spf13/cobra"
	"github.com/toolgate/toolgate/internal/cli"
	"github.com/toolgate/toolgate/internal/host/daemon"
)

func newServeCmd(g *cli.Globals) *cobra.Command {
	var debug, rm bool
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the gateway: create or re-attach one sandbox per agent and serve the admin API",
		Long: `Run the gateway in the foreground. It refuses to start when the config is invalid,
the audit log cannot be opened or the Docker Engine is unreachable.
The admin API answers at once; the sandboxes come up behind it (toolgate agents
shows each starting, then running, or failed with why) and a call to one still
starting waits for it.
SIGHUP reloads the config; SIGTERM/SIGINT drain calls in flight and stop.
Sandboxes keep running after it stops and are re-attached by the next serve,
unless --rm (or gateway.sandbox.removeOnExit) removes them as it stops, once
the calls in flight have ended, each removal on the audit record. Workspaces
always stay.`,
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			level := slog.LevelInfo
			if debug {
				level = slog.LevelDebug
			}
			log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			return daemon.Run(cmd.Context(), daemon.Options{Home: g.Home, ConfigPath: g.Config, Logger: log, RemoveOnExit: rm})
		},
	}
	cmd.Flags().BoolVar(&debug, "debug", false, "log at debug level")
	cmd.Flags().BoolVar(&rm, "rm", false, "remove the agents' sandboxes when the gateway stops (not their workspaces)")
	return cmd
}
