package gatewaycmd

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/toolgate/toolgate/internal/cli"
	"github.com/toolgate/toolgate/internal/host/config"
	"github.com/toolgate/toolgate/internal/proto"
	"github.com/toolgate/toolgate/internal/proto/hooks"
)

func newHooksCmd(g *cli.Globals) *cobra.Command {
	cmd := &cobra.Command{Use: "hooks", Short: "Claude Code hooks: the gate and tap settings"}
	var agent, merge string
	var timeout int
	settings := &cobra.Command{
		Use:   "settings --agent AGENT [--merge existing.json]",
		Short: "Print the Claude Code settings that register toolgate's gate and tap",
		Long: `Prints the settings document with toolgate's PreToolUse gate (onFailure "block")
and its PostToolUse/PostToolUseFailure tap, merged into --merge without clobbering
other hooks or settings. The file given to --merge is only read.`,
		Example: `  toolgate hooks settings --agent demo > settings.json
  toolgate hooks settings --agent demo --merge .claude/settings.json > merged.json`,
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if agent == "" {
				return cli.UsageErr(cmd, "--agent is required")
			}
			cfg, err := config.Load(g.Home, g.ConfigPath())
			if err != nil {
				return err
			}
			if _, ok := cfg.Agents[agent]; !ok {
				return fmt.Errorf("no agent %q in %s", agent, g.ConfigPath())
			}
			var existing []byte
			if merge != "" {
				if existing, err = os.ReadFile(merge); err != nil {
					return err
				}
			}
			out, err := hooks.MergeSettings(existing, hooks.GateCommand{Command: proto.ClientPath, Timeout: timeout})
			if err != nil {
				return fmt.Errorf("%s: %w (the file is left as it was)", merge, err)
			}
			_, err = os.Stdout.Write(out)
			return err
		},
	}
	settings.Flags().StringVar(&agent, "agent", "", "the agent whose sandbox runs Claude Code")
	settings.Flags().StringVar(&merge, "merge", "", "an existing settings file to merge into (read only)")
	settings.Flags().IntVar(&timeout, "timeout", hooks.DefaultGateTimeout, "the gate's hook timeout in seconds")
	cmd.AddCommand(settings, newHooksInstallCmd())
	return cmd
}

func newHooksInstallCmd() *cobra.Command {
	var managed bool
	var file, client string
	cmd := &cobra.Command{
		Use:   "install --managed [--file PATH] [--client PATH]",
		Short: "Write the gate and tap into Claude Code's managed settings",
		Long: `Registers toolgate's gate and tap in Claude Code's managed (policy) settings file,
merged into the file when it exists, with allowManagedHooksOnly set. Managed hooks are
the only ones an agent cannot switch off: disableAllHooks in the workspace's
.claude/settings.json or settings.local.json, in ~/.claude or in a --settings it passes
leaves them running, and allowManagedHooksOnly ignores the hooks those files add.
Every toolgate sandbox gets this file mounted read-only; use this command where
Claude Code runs outside one (a custom image, a VM). Only --managed is offered:
every other settings file is the agent's to write.`,
		Example: `  sudo toolgate hooks install --managed
  toolgate hooks install --managed --file ./image/etc/claude-code/managed-settings.json`,
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !managed {
				return cli.UsageErr(cmd, "--managed is required: only managed settings keep the gate out of the agent's reach")
			}
			existing, err := os.ReadFile(file)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			out, err := hooks.ManagedSettings(existing, hooks.GateCommand{Command: client})
			if err != nil {
				return fmt.Errorf("%s: %w (the file is left as it was)", file, err)
			}
			if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
				return err
			}
			// Written beside and renamed: Claude Code never reads half a file.
			tmp, err := os.CreateTemp(filepath.Dir(file), ".managed-settings-*")
			if err != nil {
				return err
			}
			defer os.Remove(tmp.Name())
			if _, err := tmp.Write(out); err != nil {
				tmp.Close()
				return err
			}
			if err := tmp.Chmod(0o644); err != nil {
				tmp.Close()
				return err
			}
			if err := tmp.Close(); err != nil {
				return err
			}
			if err := os.Rename(tmp.Name(), file); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "wrote", file)
			return nil
		},
	}
	cmd.Flags().BoolVar(&managed, "managed", false, "write the managed (policy) settings file")
	cmd.Flags().StringVar(&file, "file", filepath.Join(hooks.ManagedSettingsDir, hooks.ManagedSettingsFile), "the managed settings file")
	cmd.Flags().StringVar(&client, "client", proto.ClientPath, "absolute path of toolgate-client where Claude Code runs")
	return cmd
}
