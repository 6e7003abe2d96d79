package gatewaycmd

import (
	"encoding/json"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/toolgate/toolgate/internal/cli"
	"github.com/toolgate/toolgate/internal/host/door/modeldoor"
	"github.com/toolgate/toolgate/internal/lib/textsafe"
)

func newUsageCmd(g *cli.Globals) *cobra.Command {
	var agent string
	var since cli.WhenFlag
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "usage",
		Short:   "Model calls, tokens in/out and cost by model, from the audit log",
		Example: "  toolgate usage --agent demo --since 24h",
		Args:    cli.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := auditDir(g)
			if err != nil {
				return err
			}
			rows, err := modeldoor.Usage(dir, agent, since.Cutoff())
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(os.Stdout).Encode(rows)
			}
			if len(rows) == 0 {
				fmt.Println("no model calls in the window")
				return nil
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "AGENT\tPROVIDER\tMODEL\tCALLS\tDENIED\tERRORS\tIN\tOUT\tCACHE R/W\tCOST USD\t")
			var total modeldoor.UsageRow
			for _, r := range rows {
				cost := fmt.Sprintf("%.4f", r.CostUSD)
				if r.Unpriced > 0 {
					cost += " (no price)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d/%d\t%s\t\n", textsafe.Line(r.Agent), textsafe.Line(r.Provider), textsafe.Line(r.Model), r.Calls, r.Denied, r.Errors, r.Input, r.Output, r.CacheRead, r.CacheWrite, cost)
				total.Calls += r.Calls
				total.Denied += r.Denied
				total.Errors += r.Errors
				total.Input += r.Input
				total.Output += r.Output
				total.CostUSD += r.CostUSD
			}
			fmt.Fprintf(tw, "total\t\t\t%d\t%d\t%d\t%d\t%d\t\t%.4f\t\n", total.Calls, total.Denied, total.Errors, total.Input, total.Output, total.CostUSD)
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&agent, "agent", "", "only this agent")
	cmd.Flags().Var(&since, "since", "only calls since then: how long ago (24h, 7d) or an RFC 3339 time")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the rows as JSON")
	return cmd
}
