package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

// GatewayBinary holds the commands that run the gateway's own code (serve,
// policy, audit …) with everything they link: CEL, the Docker and
// Kubernetes clients, the MCP SDK, SQLite, pgx, Prometheus. It is installed
// beside toolgate, which stays small so that a client command starts in
// about a millisecond instead of running all their initialisers first.
const GatewayBinary = "toolgate-gateway"

// gatewayCommand is a command toolgate hands to GatewayBinary, with its
// short help for `toolgate --help`.
type gatewayCommand struct{ name, short string }

// gatewayCommands are the top-level commands toolgate hands to
// GatewayBinary. TestThinTreeListsEveryCommand (gatewaycmd) keeps them equal
// to the real commands.
var gatewayCommands = []gatewayCommand{
	{"init", "Write a commented config, an admin token and the gateway's signing key into the toolgate home"},
	{"serve", "Run the gateway: create or re-attach one sandbox per agent and serve the admin API"},
	{"config", "Inspect the configuration"},
	{"policy", "Test policy decisions"},
	{"sandbox", "Manage sandboxes and their images: ls, stop, rm, prune, image"},
	{"tools", "Review and approve the tool definitions of upstream MCP servers"},
	{"usage", "Model calls, tokens in/out and cost by model, from the audit log"},
	{"agent", "Run toolgate's own agent loop on a task: a model and the agent's gated tools"},
	{"hooks", "Claude Code hooks: the gate and tap settings"},
	{"secrets", "Manage host-side secrets (HOME/secrets.yaml, 0600; never mounted into a sandbox)"},
	{"token", "Create, list and revoke scoped bearer tokens"},
	{"id", "Print this gateway's id and the key its audit checkpoints and receipts are checked with"},
	{"witness", "Run a witness: cosign gateways' audit checkpoints that are consistent with what it saw before"},
}

// delegated returns a stand-in for each of gatewayCommands.
func delegated(*Globals) []*cobra.Command { return standIns(gatewayCommands) }

// standIns returns a stand-in for each of cmds: it parses nothing and
// replaces this process with GatewayBinary given the same command line, so
// flags, help, stdin, signals, the exit status and the pid (serve.lock
// records it) are the gateway's own.
func standIns(cmds []gatewayCommand) []*cobra.Command {
	var out []*cobra.Command
	for _, c := range cmds {
		cmd := &cobra.Command{
			Use:                c.name,
			Short:              c.short,
			DisableFlagParsing: true,
			RunE: func(cmd *cobra.Command, args []string) error {
				return execGateway(cmd, append(commandWords(cmd), args...))
			},
		}
		// Shell completion of its subcommands and flags is the gateway's too.
		cmd.ValidArgsFunction = func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			req := cobra.ShellCompRequestCmd
			for _, c := range cmd.Root().Commands() { // Find would overwrite how it was called
				if c.CalledAs() == cobra.ShellCompNoDescRequestCmd {
					req = cobra.ShellCompNoDescRequestCmd
				}
			}
			err := execGateway(cmd, append(append([]string{req}, commandWords(cmd)...), append(args, toComplete)...))
			cobra.CompErrorln(err.Error())
			return nil, cobra.ShellCompDirectiveError
		}
		cmd.SetHelpFunc(func(cmd *cobra.Command, _ []string) {
			if err := execGateway(cmd, append(commandWords(cmd), "--help")); err != nil {
				fmt.Fprintln(cmd.ErrOrStderr(), "toolgate:", err)
			}
		})
		out = append(out, cmd)
	}
	return out
}

// commandWords is cmd's path without the program's name: [policy].
func commandWords(cmd *cobra.Command) []string { return strings.Fields(cmd.CommandPath())[1:] }

// execGateway replaces this process with GatewayBinary from the directory
// this executable is in (links resolved), given args, to run cmd. Never
// from $PATH: another version there would answer for this one. It returns
// only on failure.
func execGateway(cmd *cobra.Command, args []string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding %s: %w", GatewayBinary, err)
	}
	bin := filepath.Join(filepath.Dir(self), GatewayBinary)
	err = syscall.Exec(bin, append([]string{bin}, args...), os.Environ())
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("`toolgate %s` runs %s, which is not installed beside toolgate (%s): install both binaries side by side (README)",
			strings.Join(commandWords(cmd), " "), GatewayBinary, bin)
	}
	return fmt.Errorf("running %s: %w", bin, err)
}
