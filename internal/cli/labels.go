package cli

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/toolgate/toolgate/internal/lib/textsafe"
	"github.com/toolgate/toolgate/internal/proto/api"
)

func newLabelsCmd(g *Globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "labels",
		Short: "Show or clear the session labels agents' calls gave them (private, untrusted …)",
		Long: `Session labels are what an agent's allowed calls gave its sessions
(session.labels in the configuration; rules read them). They are never
cleared by time or by the agent: clear them once you have looked.`,
	}
	var asJSON bool
	show := &cobra.Command{
		Use:   "show AGENT",
		Short: "List an agent's session labels, each with the call that gave it first",
		Args:  Words(1, 1, "AGENT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.Dial()
			if err != nil {
				return err
			}
			l, err := c.Labels(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return printLabels(l, asJSON)
		},
	}
	show.Flags().BoolVar(&asJSON, "json", false, "print them as JSON")
	var reason string
	clear := &cobra.Command{
		Use:   "clear AGENT --reason TEXT",
		Short: "Take every session label from an agent, on the record",
		Args:  Words(1, 1, "AGENT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.Dial()
			if err != nil {
				return err
			}
			l, err := c.ClearLabels(cmd.Context(), args[0], reason)
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stdout, "cleared %d labels of %s (audit entry %s)\n", len(l.Labels), textsafe.Line(l.Agent), l.Entry)
			return nil
		},
	}
	clear.Flags().StringVar(&reason, "reason", "", "why (recorded with the clear)")
	_ = clear.MarkFlagRequired("reason")
	cmd.AddCommand(show, clear)
	return cmd
}

func printLabels(l *api.Labels, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(l)
	}
	if len(l.Labels) == 0 {
		fmt.Fprintf(os.Stdout, "agent %s has no session labels\n", textsafe.Line(l.Agent))
		return nil
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LABEL\tGIVEN BY\tTOOL\tTARGET\tAT")
	for _, n := range slices.Sorted(maps.Keys(l.Labels)) {
		g := l.Labels[n]
		fmt.Fprintf(tw, "%s\t%s\t%s %s\t%s\t%s\n", textsafe.Line(n), textsafe.Line(g.Call), g.Kind, textsafe.Line(g.Tool),
			textsafe.Line(g.Target), g.At.Local().Format(time.DateTime))
	}
	return tw.Flush()
}
