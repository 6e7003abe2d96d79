package cli

import (
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/toolgate/toolgate/internal/lib/textsafe"
)

func newAgentsCmd(g *Globals) *cobra.Command {
	return &cobra.Command{
		Use:   "agents",
		Short: "List agents with their sandbox state and call counts",
		Args:  NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.Dial()
			if err != nil {
				return err
			}
			rows, err := c.Agents(cmd.Context())
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "AGENT\tCONTAINER\tIMAGE\tSTATE\tUPTIME\tCALLS\tDENIALS")
			for _, r := range rows {
				uptime := "-"
				if !r.StartedAt.IsZero() && r.State == "running" {
					uptime = time.Since(r.StartedAt).Round(time.Second).String()
				}
				state := r.State
				if r.Error != "" { // a sandbox's error may quote what ran in it
					state += " (" + r.Error + ")"
				}
				if r.Waiting > 0 {
					state += fmt.Sprintf(" (%d calls waiting)", r.Waiting)
				}
				fmt.Fprintf(tw, "%s\t%.12s\t%s\t%s\t%s\t%d\t%d\n", textsafe.Line(r.Agent), textsafe.Line(r.Container), textsafe.Line(r.Image),
					textsafe.Line(state), uptime, r.Calls, r.Denials)
			}
			return tw.Flush()
		},
	}
}
