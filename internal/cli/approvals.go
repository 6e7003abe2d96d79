package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/toolgate/toolgate/internal/lib/textsafe"
	"github.com/toolgate/toolgate/internal/proto/api"
)

func newApprovalsCmd(g *Globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "approvals",
		Short: "List the calls waiting for a person (rules with ask:); show, approve or deny them",
		Long: `A rule written with ask: instead of deny: or allow: holds a matching call until a
person answers (up to the agent's askTimeout, default 2m; no answer is a denial).
This lists the waiting calls with the facts policy saw, secrets redacted as in
the audit log; a call cut to fit its line, or with input, says so: toolgate
approvals show ID prints all of it (every argument on its own line, the whole
input) and the digest an approval binds. Answer with toolgate approvals approve
ID or toolgate approvals deny ID --reason TEXT. Who answered, and when, is
recorded in the call's audit entry.`,
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
				return printJSON(out, rows)
			}
			if len(rows) == 0 {
				fmt.Fprintln(out, "no calls are waiting for approval")
				return nil
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tAGENT\tTOOL\tRULE\tWAITING\tLEFT\tCALL")
			for _, p := range rows {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", textsafe.Line(p.ID), textsafe.Line(p.Agent), textsafe.Line(p.Tool),
					textsafe.Line(p.Rule), time.Since(p.Asked).Round(time.Second), time.Until(p.Deadline).Round(time.Second), callCell(&p))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the waiting calls as JSON, with every fact (inputs shortened: approvals show ID --json has them whole)")
	cmd.AddCommand(newApprovalShowCmd(g), newAnswerCmd(g, true), newAnswerCmd(g, false))
	return cmd
}

// callCellMax is how much of a call its line in the list shows.
const callCellMax = 160

// callCell is what a waiting call would do, in a line: its command, argv,
// path, host or arguments, rendered safe. A person decides on it, so a cut
// says how much is left out and where to see it, and so does an input.
func callCell(p *api.Pending) string {
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
	line, cut := textsafe.Clip(what, callCellMax)
	if cut > 0 {
		line += fmt.Sprintf(" [%d more bytes: toolgate approvals show %s]", cut, p.ID)
	}
	if p.Input != nil {
		line += fmt.Sprintf(" [input: %d bytes: toolgate approvals show %s]", p.Input.Bytes, p.ID)
	}
	return line
}

func newApprovalShowCmd(g *Globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Print all of a waiting call: every argument, its whole input, the digest an approval binds",
		Args:  Words(1, 1, "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.Dial()
			if err != nil {
				return err
			}
			p, err := c.Approval(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return printJSON(out, p)
			}
			printPending(out, &p)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the call as JSON (the input base64, as data)")
	return cmd
}

// printPending writes all of a waiting call for a person: one fact a line,
// each argument and each line of the input on a line of its own, all of it
// rendered safe (an input's line cannot pass for a fact).
func printPending(w io.Writer, p *api.Pending) {
	fact := func(name, value string) { fmt.Fprintf(w, "%-9s %s\n", name, value) }
	fact("call", textsafe.Line(p.ID))
	fact("agent", textsafe.Line(p.Agent))
	fact("tool", fmt.Sprintf("%s (%s)", textsafe.Line(p.Tool), textsafe.Line(string(p.Kind))))
	fact("rule", textsafe.Line(p.Rule)+": "+textsafe.Line(p.Reason))
	fact("waiting", fmt.Sprintf("%s, %s left", time.Since(p.Asked).Round(time.Second), time.Until(p.Deadline).Round(time.Second)))
	if p.Session != "" {
		fact("session", textsafe.Line(p.Session))
	}
	fact("digest", p.Digest+" (what an approval binds: the arguments and the input below)")
	if p.Command != "" {
		fact("command", textsafe.Line(p.Command))
	}
	for i, a := range p.Argv {
		fact(fmt.Sprintf("argv[%d]", i), textsafe.Line(a))
	}
	if p.Path != "" {
		fact("path", textsafe.Line(p.Path))
	}
	if p.Host != "" {
		fact("host", fmt.Sprintf("%s:%d", textsafe.Line(p.Host), p.Port))
	}
	fact("args", textsafe.Line(p.Args))
	if p.Input == nil {
		fact("input", "none")
		return
	}
	fact("input", fmt.Sprintf("%d bytes, sha256 %s, each line below after \"| \"", p.Input.Bytes, p.Input.SHA256))
	data := strings.TrimSuffix(string(p.Input.Data), "\n")
	if len(p.Input.Data) == 0 {
		return
	}
	for l := range strings.SplitSeq(data, "\n") {
		fmt.Fprintf(w, "  | %s\n", textsafe.Line(l))
	}
	if !strings.HasSuffix(string(p.Input.Data), "\n") {
		fmt.Fprintln(w, "  (no newline at the end)")
	}
	if p.Input.Cut > 0 {
		fmt.Fprintf(w, "  … %d more bytes not shown\n", p.Input.Cut)
	}
}

func newAnswerCmd(g *Globals, approve bool) *cobra.Command {
	var a api.ApprovalAnswer
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
		cmd.Flags().StringVar(&a.Raise, "raise", "", "a call at its task's budget: the new caps, e.g. cost=4,calls=1000")
	} else {
		_ = cmd.MarkFlagRequired("reason")
	}
	return cmd
}
