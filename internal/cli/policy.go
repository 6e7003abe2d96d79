package cli

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/toolgate/toolgate/internal/adminapi"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/daemon"
	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/policy"
)

func newPolicyCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "policy", Short: "Test policy decisions"}
	var agent, tool, args string
	var live bool
	eval := &cobra.Command{
		Use:   "eval --agent NAME --tool TOOL [--args JSON]",
		Short: "Explain the decision a call would get: the deciding rule, why, and every rule's result",
		Long: `Decide a call without running or recording it. By default the config file is read
directly (so a change can be tested before it is loaded); --live asks the running daemon.`,
		Example: `  toolgate policy eval --agent demo --tool exec --args '{"command":"rm -rf /"}'`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			call := &gateway.Call{Agent: agent, Tool: tool, Args: json.RawMessage(args), Via: "cli"}
			var x policy.Explanation
			if live {
				c, err := adminapi.Dial(g.home)
				if err != nil {
					return err
				}
				raw, err := c.Eval(cmd.Context(), adminapi.EvalRequest{Agent: agent, Tool: tool, Args: call.Args})
				if err != nil {
					return err
				}
				if err := json.Unmarshal(raw, &x); err != nil {
					return err
				}
			} else {
				cfg, err := config.Load(g.home, g.config)
				if err != nil {
					return err
				}
				built, err := daemon.Build(cfg)
				if err != nil {
					return err
				}
				x = built.Explain(call)
			}
			fmt.Print(x.String())
			return nil
		},
	}
	eval.Flags().StringVar(&agent, "agent", "", "agent name")
	eval.Flags().StringVar(&tool, "tool", "", "tool name (read, write, patch, exec, or a plugin tool)")
	eval.Flags().StringVar(&args, "args", "{}", "the call's arguments as a JSON object")
	eval.Flags().BoolVar(&live, "live", false, "ask the running daemon instead of reading the config file")
	_ = eval.MarkFlagRequired("agent")
	_ = eval.MarkFlagRequired("tool")
	cmd.AddCommand(eval)
	return cmd
}
