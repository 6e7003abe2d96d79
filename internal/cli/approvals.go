package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/toolgate/toolgate/internal/adminclient"
)

func newApprovalsCmd(g *Globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "approvals",
		Short: "List the calls waiting for a person (rules with ask:); approve or deny them",
		Long: `A rule written with ask: instead of deny: or allow: holds a matching call until a
person answers (up to the agent's askTimeout, default 2m; no answer is a denial).
This lists the waiting calls with the facts policy saw; answer with
toolgate approvals approve ID or toolgate approvals deny ID --reason TEXT.
Who answered, and when, is recorded in the call's audit entry.`,
		Args: NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.Dial()
			if err != nil {
				return err
			}
			rows, err := c.Approvals(cmd.Context())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(rows)
			}
			if len(rows) == 0 {
				fmt.Fprintln(out, "no calls are waiting for approval")
				return nil
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tAGENT\tTOOL\tRULE\tWAITING\tLEFT\tCALL")
			for _, p := range rows {
				what := p.Command
				switch {
				case what == "" && len(p.Argv) > 0:
					what = strings.Join(p.Argv, " ")
				case what == "" && p.Path != "":
					what = p.Path
				case what == "" && p.Host != "":
					what = fmt.Sprintf("%s:%d", p.Host, p.Port)
				case what == "":
					what = p.Args
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%.80s\n", p.ID, p.Agent, p.Tool, p.Rule,
					time.Since(p.Asked).Round(time.Second), time.Until(p.Deadline).Round(time.Second), oneLineText(what))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the waiting calls as JSON, with every fact")
	cmd.AddCommand(newAnswerCmd(g, true), newAnswerCmd(g, false))
	return cmd
}

func newAnswerCmd(g *Globals, approve bool) *cobra.Command {
	var a adminclient.ApprovalAnswer
	var standFor time.Duration
	a.Approve = approve
	use, short := "deny ID --reason TEXT", "Deny a waiting call"
	if approve {
		use, short = "approve ID [--for 1h [--same-args]]", "Approve a waiting call (and, with --for, the same rule's calls for a while)"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  Words(1, 1, "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if standFor > 0 {
				a.For = standFor.String()
			}
			c, err := g.Dial()
			if err != nil {
				return err
			}
			if err := c.Answer(cmd.Context(), args[0], a); err != nil {
				return err
			}
			verb := "denied"
			if approve {
				verb = "approved"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", verb, args[0])
			return nil
		},
	}
	cmd.Flags().StringVar(&a.Reason, "reason", "", "why (recorded, and shown to the agent on a denial)")
	if approve {
		cmd.Flags().DurationVar(&standFor, "for", 0, "let the approval stand this long for the agent's calls the same rule asks about")
		cmd.Flags().BoolVar(&a.SameArgs, "same-args", false, "with --for: only for calls with the same tool and arguments")
	} else {
		_ = cmd.MarkFlagRequired("reason")
	}
	return cmd
}

func oneLineText(s string) string { return strings.Join(strings.Fields(s), " ") }
