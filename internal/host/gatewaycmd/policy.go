package gatewaycmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/toolgate/toolgate/internal/cli"
	"github.com/toolgate/toolgate/internal/host/assemble"
	"github.com/toolgate/toolgate/internal/host/audit"
	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/host/door/egress"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/hookcall"
	"github.com/toolgate/toolgate/internal/host/policy"
	"github.com/toolgate/toolgate/internal/host/replay"
	"github.com/toolgate/toolgate/internal/host/suggest"
	"github.com/toolgate/toolgate/internal/lib/textsafe"
	"github.com/toolgate/toolgate/internal/proto"
	"github.com/toolgate/toolgate/internal/proto/api"
	"github.com/toolgate/toolgate/internal/proto/hooks"
)

func newPolicyCmd(g *cli.Globals) *cobra.Command {
	cmd := &cobra.Command{Use: "policy", Short: "Test policy decisions"}
	var agent, tool, args, kind string
	var live bool
	eval := &cobra.Command{
		Use:   "eval AGENT TOOL [JSON | --args JSON]",
		Short: "Explain the decision a call would get: the deciding rule, why, and every rule's result",
		Long: `Decide a call without running or recording it. By default the config file is read
directly (so a change can be tested before it is loaded); --live asks the running daemon.
The agent, tool and arguments are words in that order, or the flags --agent, --tool, --args.`,
		Example: `  toolgate policy eval demo exec '{"argv":["rm","-rf","/"]}'
  toolgate policy eval --agent demo --tool exec --args '{"command":"rm -rf /"}'
  toolgate policy eval --agent demo --kind hook --tool Bash --args '{"command":"rm -rf /"}'
  toolgate policy eval --agent demo --kind egress --args '{"target":"pypi.org:443"}'
  toolgate policy eval --agent demo --kind model --tool scripted --args '{"endpoint":"messages","model":"scripted"}'`,
		Args: cli.Words(0, 3, "AGENT TOOL [JSON]"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			// The words are what the flags say, in their order, as `call` takes them.
			for i, p := range []struct {
				flag string
				v    *string
			}{{"agent", &agent}, {"tool", &tool}, {"args", &args}} {
				if i >= len(argv) {
					break
				}
				if cmd.Flags().Changed(p.flag) {
					return cli.UsageErr(cmd, fmt.Sprintf("give the %s once: as a word or with --%s", p.flag, p.flag))
				}
				*p.v = argv[i]
			}
			if agent == "" {
				return cli.UsageErr(cmd, "which agent? give it as the first word or with --agent")
			}
			call, err := evalCall(agent, gateway.Kind(kind), tool, json.RawMessage(args))
			if err != nil {
				return err
			}
			var x policy.Explanation
			if live {
				c, err := g.Dial()
				if err != nil {
					return err
				}
				raw, err := c.Eval(cmd.Context(), api.EvalRequest{Agent: agent, Tool: tool, Args: call.Args})
				if err != nil {
					return err
				}
				if err := json.Unmarshal(raw, &x); err != nil {
					return err
				}
			} else {
				cfg, err := config.Load(g.Home, g.Config)
				if err != nil {
					return err
				}
				built, err := assemble.Build(cfg, nil, nil)
				if err != nil {
					return err
				}
				x = built.Explain(call)
			}
			fmt.Fprint(cmd.OutOrStdout(), x.String())
			return nil
		},
	}
	eval.Flags().StringVar(&agent, "agent", "", "agent name")
	eval.Flags().StringVar(&tool, "tool", "", "tool name (read, write, patch, exec, a plugin tool, or Claude Code's tool with --kind hook)")
	eval.Flags().StringVar(&kind, "kind", "", "call kind: core_tool or tool (from --tool when omitted), hook (args are Claude Code's tool_input), egress (args {\"target\":\"host:port\"}), model (--tool PROVIDER, args {\"endpoint\":\"messages\",\"model\":…,\"max_tokens\":…})")
	eval.Flags().StringVar(&args, "args", "{}", "the call's arguments as a JSON object")
	eval.Flags().BoolVar(&live, "live", false, "ask the running daemon instead of reading the config file")
	cmd.AddCommand(eval, newPolicyTestCmd(g), newPolicyReplayCmd(g), newPolicySuggestCmd(g))
	return cmd
}

// evalCall builds the call policy eval decides, as its door would: a hook's
// args are Claude Code's tool_input, read by the hook's own mapping.
func evalCall(agent string, kind gateway.Kind, tool string, args json.RawMessage) (*gateway.Call, error) {
	switch {
	case kind == gateway.KindEgress && tool == "":
		tool = egress.ToolName
	case tool == "":
		return nil, errors.New("--tool is required (except with --kind egress)")
	}
	if kind != gateway.KindHook {
		return &gateway.Call{Agent: agent, Kind: kind, Tool: tool, Args: args, Via: "cli"}, nil
	}
	call, err := hookcall.ToCall(&hooks.Input{HookEventName: hooks.EventPreToolUse, ToolName: tool,
		ToolInput: args, Cwd: proto.WorkspacePath}, proto.WorkspacePath)
	if err != nil {
		return nil, fmt.Errorf("hook call: %w", err)
	}
	call.Agent = agent // Via stays hook: the hook tool decides only calls of its door
	return call, nil
}

func newPolicyTestCmd(g *cli.Globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "test",
		Short: "Run every rule's examples; exit 1 when one fails",
		Long: `Checks each rule's examples.match (calls the rule must match) and
examples.not_match (calls it must not) in the config file. serve and config
check refuse a config whose examples fail; this command lists them all.`,
		Example: `  toolgate policy test
  toolgate policy test --json | jq '.[] | select(.pass | not)'`,
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(g.Home, g.Config)
			if err != nil {
				return err
			}
			res, err := policy.Test(cfg)
			if err != nil {
				return err
			}
			failed := 0
			type row struct {
				policy.ExampleResult
				Pass bool `json:"pass"`
			}
			rows := make([]row, len(res))
			for i, r := range res {
				rows[i] = row{r, r.Pass()}
				if !r.Pass() {
					failed++
				}
			}
			out := cmd.OutOrStdout()
			if asJSON {
				if err := printJSON(out, rows); err != nil {
					return err
				}
			} else {
				for _, r := range rows {
					mark := "ok  "
					if !r.Pass {
						mark = "FAIL"
					}
					want := "match"
					if !r.Want {
						want = "not match"
					}
					fmt.Fprintf(out, "%s  %s: %s must %s %s\n", mark, r.Field, r.Rule, want, r.Example)
					if r.Error != "" {
						fmt.Fprintf(out, "      the rule errored: %s\n", r.Error)
					}
				}
				fmt.Fprintf(out, "%d examples, %d passed, %d failed\n", len(rows), len(rows)-failed, failed)
			}
			if failed > 0 {
				return cli.ExitCode(1)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the results as JSON")
	return cmd
}

func newPolicyReplayCmd(g *cli.Globals) *cobra.Command {
	var (
		since   cli.WhenFlag
		f       audit.Filter
		asJSON  bool
		all     bool
		logDir  string
		maxRows int
	)
	cmd := &cobra.Command{
		Use:   "replay [--config candidate.yaml] [--since 7d] [--agent NAME]",
		Short: "Re-decide recorded calls under a policy and show what would change",
		Long: `Reads the decision entries of the audit log and decides each call again under
the policy of --config (default: the current config file), printing every call
whose verdict or deciding rule would change, then a summary. Nothing runs.
Arguments are decided as the log kept them: bodies at their recorded size, and
a call whose arguments were cut when recorded is marked approximate (~).`,
		Example: `  cp ~/.toolgate/config.yaml new.yaml && $EDITOR new.yaml
  toolgate policy replay --config new.yaml --since 7d
  toolgate policy replay --config new.yaml --agent demo --json | jq '.changes[]'`,
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, err := readHistory(g, logDir)
			if err != nil {
				return err
			}
			built, dir := h.built, h.dir
			f.Since = since.Cutoff()
			out := cmd.OutOrStdout()
			var changes []replay.Outcome
			shown := 0
			sum, err := replay.Log(dir, f, built.Snapshot, func(o replay.Outcome) error {
				if o.Change() == "" && !all {
					return nil
				}
				if asJSON {
					changes = append(changes, o)
					return nil
				}
				if shown++; maxRows > 0 && shown > maxRows {
					return nil
				}
				mark := " "
				if o.Approximate {
					mark = "~"
				}
				change := o.Change()
				if change == "" {
					change = "same"
				}
				fmt.Fprintf(out, "%s %s %s %-8s %-10s %-16s %s(%s) → %s(%s): %s\n", mark, o.TS.Local().Format("2006-01-02 15:04:05"),
					textsafe.Line(o.ID), textsafe.Line(o.Agent), textsafe.Line(o.Tool), change, o.Was.Verdict(), textsafe.Line(o.Was.Rule),
					o.Now.Verdict(), textsafe.Line(o.Now.Rule), textsafe.Line(o.Now.Reason))
				return nil
			})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(out, map[string]any{"summary": sum, "changes": changes})
			}
			if maxRows > 0 && shown > maxRows {
				fmt.Fprintf(out, "… %d more (--max 0 shows all)\n", shown-maxRows)
			}
			fmt.Fprintf(out, "%d decisions replayed: %d same, %d allowed→denied, %d denied→allowed, %d by another rule, %d would ask a person; %d approximate (arguments cut when recorded); %d other entries skipped\n",
				sum.Replayed, sum.Same, sum.AllowedToDenied, sum.DeniedToAllowed, sum.RuleChanged, sum.ToAsk, sum.Approximate, sum.Skipped)
			return nil
		},
	}
	cmd.Flags().Var(&since, "since", "only calls since then: how long ago (7d, 12h) or an RFC 3339 time")
	cmd.Flags().StringVar(&f.Agent, "agent", "", "only this agent's calls")
	cmd.Flags().StringVar(&f.Tool, "tool", "", "only calls of this tool")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the summary and the changes as JSON")
	cmd.Flags().BoolVar(&all, "all", false, "list unchanged calls too")
	cmd.Flags().StringVar(&logDir, "log", "", "audit directory to read (default: the config's gateway.audit.dir)")
	cmd.Flags().IntVar(&maxRows, "max", 200, "print at most this many calls (0: all)")
	return cmd
}

func newPolicySuggestCmd(g *cli.Globals) *cobra.Command {
	var (
		since  cli.WhenFlag
		agent  string
		output string
		logDir string
	)
	cmd := &cobra.Command{
		Use:   "suggest --agent NAME [--since 7d] [-o FILE]",
		Short: "Write least-privilege policy for an agent from the calls it made",
		Long: `Reads the agent's allowed calls in the audit log and writes the configuration
file with the agent's section rewritten to allow what it did and nothing else:
default deny; rules for the commands and flags it ran, the directories it read
and wrote, the subcommands of each plugin tool, the Claude Code tools it used,
each with examples drawn from the log; its tools, egress hosts and models cut
to those used; core tools it never used switched off. Its own rules stay, and
so does every comment elsewhere. What the current policy allows that the
suggestion does not is listed at the top of the agent's section. Review it,
then replay the same window under it: every call it learned from is allowed.`,
		Example: `  toolgate policy suggest --agent demo --since 7d -o suggested.yaml
  toolgate policy replay --config suggested.yaml --agent demo --since 7d`,
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if agent == "" {
				return cli.UsageErr(cmd, "--agent is required: whose calls to learn from")
			}
			h, err := readHistory(g, logDir)
			if err != nil {
				return err
			}
			rep, err := suggest.Suggest(h.built.Config, h.src, h.built.Snapshot, suggest.Options{Agent: agent, Since: since.Cutoff(), Dir: h.dir})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if output != "" && output != "-" {
				if err := os.WriteFile(output, rep.Config, 0o600); err != nil {
					return err
				}
				out = cmd.ErrOrStderr()
			} else {
				if _, err := out.Write(rep.Config); err != nil {
					return err
				}
				out = cmd.ErrOrStderr()
			}
			fmt.Fprintf(out, "learned from %d allowed calls of %s (%s – %s): %d rules; %d entries not readable as calls\n",
				rep.Calls, agent, rep.From.Local().Format(time.DateTime), rep.To.Local().Format(time.DateTime), rep.Rules, rep.Skipped)
			for _, n := range rep.Narrowed {
				fmt.Fprintf(out, "  narrowed: %s\n", n)
			}
			if output != "" && output != "-" {
				fmt.Fprintf(out, "wrote %s; check it with: toolgate policy replay --config %s --agent %s%s\n", output, output, agent, sinceArg(cmd))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&agent, "agent", "", "the agent to learn from (required)")
	cmd.Flags().Var(&since, "since", "only calls since then: how long ago (7d, 12h) or an RFC 3339 time")
	cmd.Flags().StringVarP(&output, "output", "o", "", "write the configuration here (default: standard output)")
	cmd.Flags().StringVar(&logDir, "log", "", "audit directory to read (default: the config's gateway.audit.dir)")
	return cmd
}

func sinceArg(cmd *cobra.Command) string {
	if f := cmd.Flags().Lookup("since"); f != nil && f.Changed {
		return " --since " + f.Value.String()
	}
	return ""
}

// history is what replay and suggest read: the configuration file as
// written and as built, and the audit log.
type history struct {
	src   []byte
	built *assemble.Built
	dir   string
}

func readHistory(g *cli.Globals, logDir string) (*history, error) {
	path := g.Config
	if path == "" {
		path = filepath.Join(g.Home, "config.yaml")
	}
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cfg, err := config.Parse(g.Home, path, src)
	if err != nil {
		return nil, err
	}
	h := &history{src: src, dir: logDir}
	if h.built, err = assemble.Build(cfg, nil, nil); err != nil {
		return nil, err
	}
	if h.dir == "" {
		if h.dir, err = auditDir(g); err != nil {
			return nil, err
		}
	}
	return h, nil
}
