package cli

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

func newPatchCmd(g *Globals) *cobra.Command {
	var old, repl, diffFile string
	cmd := &cobra.Command{
		Use:   "patch AGENT PATH (--old TEXT --new TEXT | --diff FILE|-)",
		Short: "Edit a file in an agent's sandbox: replace text that occurs exactly once, or apply a unified diff",
		Args:  Words(2, 2, "AGENT PATH"),
		RunE: func(cmd *cobra.Command, args []string) error {
			call := map[string]any{"path": args[1]}
			replace := cmd.Flags().Changed("old") || cmd.Flags().Changed("new")
			switch {
			case diffFile != "" && replace:
				return UsageErr(cmd, "give --old and --new, or --diff, not both")
			case diffFile != "":
				b, err := readDiff(diffFile)
				if err != nil {
					return err
				}
				call["diff"] = string(b)
			case cmd.Flags().Changed("old") && cmd.Flags().Changed("new"):
				call["old"], call["new"] = old, repl
			case replace:
				// A forgotten --new would delete the text: an empty one is said.
				return UsageErr(cmd, "give both --old and --new (--new '' deletes the text)")
			default:
				return UsageErr(cmd, "give --old and --new, or --diff")
			}
			res, err := callTool(cmd, g, args[0], "patch", call)
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "patched %v (%v bytes)\n", output(res, "path"), output(res, "bytes"))
			return nil
		},
	}
	cmd.Flags().StringVar(&old, "old", "", "text that must occur exactly once")
	cmd.Flags().StringVar(&repl, "new", "", "replacement text")
	cmd.Flags().StringVar(&diffFile, "diff", "", "a unified diff file to apply (- reads standard input)")
	return cmd
}

// readDiff reads the diff file, or standard input for "-".
func readDiff(name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(name)
}
