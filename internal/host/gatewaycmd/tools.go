package gatewaycmd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/toolgate/toolgate/internal/cli"
	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/plugin"
	"github.com/toolgate/toolgate/internal/host/secrets"
	"github.com/toolgate/toolgate/internal/host/upstream"
	"github.com/toolgate/toolgate/internal/lib/textsafe"
)

func newToolsCmd(g *cli.Globals) *cobra.Command {
	cmd := &cobra.Command{Use: "tools", Short: "Review and approve the tool definitions of upstream MCP servers",
		Long: `An upstream MCP server's tools (plugins of kind mcp) are offered only with an approved
definition (name, description, input schema), pinned by hash in HOME/pins.json. A tool whose
definition changes upstream is withheld until it is approved again.`}
	pinsPath := func() string { return filepath.Join(g.Home, upstream.PinsFile) }

	var timeout time.Duration
	list := &cobra.Command{
		Use:   "list",
		Short: "Connect to each upstream MCP server and show its tools: pinned, changed, new or gone",
		Args:  cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(g.Home, g.ConfigPath())
			if err != nil {
				return err
			}
			store, err := secrets.Load(g.Home, cfg.Secrets)
			if err != nil {
				return err
			}
			pins, err := upstream.OpenPins(pinsPath())
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TOOL\tSTATUS\tDESCRIPTION")
			var failed []string
			for _, name := range slices.Sorted(func(yield func(string) bool) {
				for n, p := range cfg.Plugins {
					if p.Kind == upstream.Kind && !yield(n) {
						return
					}
				}
			}) {
				ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
				st, err := upstream.Inspect(ctx, name, cfg.Plugins[name], plugin.Env{Secrets: store}, pins)
				cancel()
				if err != nil {
					fmt.Fprintf(tw, "%s.*\tunreachable\t%s\n", name, oneLine(err.Error()))
					failed = append(failed, name)
					continue
				}
				for _, s := range st {
					fmt.Fprintf(tw, "%s\t%s\t%s\n", textsafe.Line(s.Name), s.Status, oneLine(s.Def.Description))
				}
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if len(failed) > 0 {
				return fmt.Errorf("could not reach %s", strings.Join(failed, ", "))
			}
			return nil
		},
	}
	list.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "how long to wait for each server")

	approve := &cobra.Command{
		Use:     "approve SERVER.TOOL|SERVER.*...",
		Short:   "Approve the definitions last seen (by `tools list` or the daemon); reload the daemon to offer them",
		Example: "  toolgate tools approve github.create_issue\n  toolgate tools approve 'github.*'",
		Args:    cli.Words(1, -1, "SERVER.TOOL..."),
		RunE: func(cmd *cobra.Command, names []string) error {
			pins, err := upstream.OpenPins(pinsPath())
			if err != nil {
				return err
			}
			all, err := pins.All()
			if err != nil {
				return err
			}
			var todo []string
			for _, n := range names {
				if server, ok := strings.CutSuffix(n, ".*"); ok {
					for key, p := range all {
						if strings.HasPrefix(key, server+".") && p.Seen != nil {
							todo = append(todo, key)
						}
					}
					continue
				}
				todo = append(todo, n)
			}
			slices.Sort(todo)
			for _, n := range todo {
				if err := pins.ApproveSeen(n); err != nil {
					return err
				}
				fmt.Fprintf(os.Stderr, "approved %s\n", textsafe.Line(n))
			}
			if len(todo) == 0 {
				return fmt.Errorf("nothing to approve for %s (run `toolgate tools list` first)", strings.Join(names, " "))
			}
			fmt.Fprintln(os.Stderr, "reload the daemon (SIGHUP) to offer the approved definitions")
			return nil
		},
	}
	cmd.AddCommand(list, approve)
	return cmd
}

// oneLine is an upstream server's text (a description, an error) in one
// short line, rendered safe: the server is not ours to trust.
func oneLine(s string) string {
	line, _ := textsafe.Clip(strings.Join(strings.Fields(s), " "), 100)
	return line
}
