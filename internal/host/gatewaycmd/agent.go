package gatewaycmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/toolgate/toolgate/internal/cli"

	"github.com/toolgate/toolgate/internal/host/agentloop"
)

func newAgentCmd(g *cli.Globals) *cobra.Command {
	var (
		req      agentloop.StartRequest
		maxTime  time.Duration
		jsonOut  bool
		noStream bool
	)
	cmd := &cobra.Command{
		Use:   "agent AGENT [TASK] [flags]",
		Short: "Run toolgate's own agent loop on a task: a model and the agent's gated tools",
		Long: `Runs a model ↔ tools loop in the gateway: the model is offered the agent's
core tools and allowed plugin tools (the schemas the MCP door publishes);
each tool call it makes goes through the gateway (decided, run in the
sandbox, audited) and a denial reaches the model as a tool error with the
rule and reason. Model requests go through the model door (provider,
allowlist, budgets, audit). The provider is the first of the agent's
model.providers whose key is set; a provider of kind scripted (the
default config's, a fixed script served by toolgate) needs none.

Ctrl-C stops the run; the session is saved after every step and
--continue picks it up (with a new task, or none to resume).`,
		Example: `  toolgate agent demo "add a --verbose flag to cli.py and a test for it"
  toolgate agent demo --continue 18ed0be9… "now update the README"
  toolgate agent demo --json "run the tests" | jq -c 'select(.type=="result")'`,
		Args: cli.Words(1, 2, "AGENT [TASK]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 2 {
				req.Task = args[1]
			}
			if req.Task == "" && req.Continue == "" {
				return cli.UsageErr(cmd, "give a task, or --continue SESSION")
			}
			// The API reads 0 as its default; said on a command line, it
			// (or less) is a mistake, not a wish for 50 steps.
			switch {
			case req.Limits.Steps < 1:
				return cli.UsageErr(cmd, fmt.Sprintf("--max-steps %d: give at least 1", req.Limits.Steps))
			case req.Limits.Tokens < 1:
				return cli.UsageErr(cmd, fmt.Sprintf("--max-tokens %d: give at least 1", req.Limits.Tokens))
			case maxTime <= 0:
				return cli.UsageErr(cmd, fmt.Sprintf("--max-time %s: give a positive duration", maxTime))
			}
			req.Limits.Time, req.NoStream = maxTime, noStream
			c, err := g.Dial()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			tr := &agentloop.Transcript{W: os.Stdout, Agent: args[0]}
			for _, k := range []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY"} {
				if os.Getenv(k) != "" {
					tr.KeysHere = append(tr.KeysHere, k)
				}
			}
			enc := json.NewEncoder(os.Stdout)
			var last agentloop.Event
			err = c.Session(ctx, args[0], &req, func(raw json.RawMessage) error {
				var e agentloop.Event
				if err := json.Unmarshal(raw, &e); err != nil {
					return fmt.Errorf("bad event from the daemon: %w", err)
				}
				if e.Session != "" {
					last.Session = e.Session
				}
				if e.Type == "stop" {
					last = e
				}
				if jsonOut {
					return enc.Encode(raw)
				}
				tr.Event(e)
				return nil
			})
			if ctx.Err() != nil && last.Type != "stop" {
				// Ctrl-C: the daemon stopped the run when we went away and
				// saved the session after its last whole step.
				if !jsonOut {
					fmt.Fprintf(os.Stdout, "\ninterrupted; the session is saved — continue with: toolgate agent %s --continue %s\n", args[0], last.Session)
				}
				return cli.ExitCode(130)
			}
			if err != nil && !errors.Is(err, context.Canceled) {
				return err
			}
			if last.Stop != agentloop.StopDone {
				return cli.ExitCode(1)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.Continue, "continue", "", "continue a saved session (its id)")
	f.StringVar(&req.Provider, "provider", "", "a provider of the agent's model.providers (default: the first whose key is set)")
	f.StringVar(&req.Model, "model", "", "the model name (default: the agent's only allowed model, or the provider's default)")
	f.IntVar(&req.Limits.Steps, "max-steps", agentloop.DefaultSteps, "stop after this many model answers")
	f.Int64Var(&req.Limits.Tokens, "max-tokens", agentloop.DefaultTokens, "stop once the answers reported this many tokens")
	f.DurationVar(&maxTime, "max-time", agentloop.DefaultTime, "stop after this much wall time")
	f.Int64Var(&req.Limits.MaxTokens, "max-output-tokens", agentloop.DefaultMaxTokens, "max_tokens of each model request")
	f.BoolVar(&noStream, "no-stream", false, "ask for whole answers instead of streamed ones")
	f.StringVar(&req.Budget, "budget", "", "caps for the run across every door, e.g. cost=2,calls=500,wall=30m (default: the agent's session.budget)")
	f.BoolVar(&jsonOut, "json", false, "print the events as JSON lines instead of the transcript")
	return cmd
}
