package cli

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

func newIngestCmd(g *Globals) *cobra.Command {
	cmd := &cobra.Command{Use: "ingest", Short: "Record what a transcript shows as observations"}
	var agent string
	sj := &cobra.Command{
		Use:   "stream-json --agent AGENT FILE",
		Short: "Ingest `claude -p --output-format stream-json --verbose` output (FILE or - for stdin)",
		Long: `Records tool_use, tool_result, permission decisions and denials and hook_no_verdict
warnings as audit entries of type observed. Re-ingesting a file records nothing
twice; a truncated last line is ignored. Observations are never decisions.`,
		Args: Words(1, 1, "FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if agent == "" {
				return UsageErr(cmd, "--agent is required")
			}
			var in io.Reader = os.Stdin
			if args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return err
				}
				defer f.Close()
				in = f
			}
			c, err := g.Dial()
			if err != nil {
				return err
			}
			ans, err := c.Observe(cmd.Context(), agent, in)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "recorded %d observations (%d already recorded)\n", ans.Recorded, ans.Duplicates)
			return nil
		},
	}
	sj.Flags().StringVar(&agent, "agent", "", "the agent the transcript belongs to")
	cmd.AddCommand(sj)
	return cmd
}
