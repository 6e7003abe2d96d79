package cli

import (
	"encoding/json"
	"os"

	"github.com/spf13/cobra"
)

func newCallCmd(g *Globals) *cobra.Command {
	var args string
	cmd := &cobra.Command{
		Use:   "call AGENT TOOL [JSON | --args JSON]",
		Short: "Call any tool with JSON arguments and print the JSON result",
		Example: `  toolgate call demo read '{"path":"notes/a.txt","limit":10}'
  toolgate call demo read --args '{"path":"notes/a.txt"}'`,
		Args: Words(2, 3, "AGENT TOOL [JSON]"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if len(argv) == 3 {
				if cmd.Flags().Changed("args") {
					return UsageErr(cmd, "give the arguments once: as the third argument or with --args")
				}
				args = argv[2]
			}
			res, err := callTool(cmd, g, argv[0], argv[1], json.RawMessage(args))
			if err != nil {
				return err
			}
			return printJSON(os.Stdout, res)
		},
	}
	cmd.Flags().StringVar(&args, "args", "{}", "arguments as a JSON object")
	return cmd
}
