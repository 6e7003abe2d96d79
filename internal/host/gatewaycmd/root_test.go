package gatewaycmd

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/internal/cli"
)

// A typo in a subcommand fails with the error, for every command group, at
// any depth; the group alone still prints its help and succeeds (unless it
// is a command of its own too).
func TestUnknownSubcommandFails(t *testing.T) {
	var groups []*cobra.Command
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		for _, s := range c.Commands() {
			if s.HasSubCommands() {
				groups = append(groups, s)
			}
			walk(s)
		}
	}
	walk(NewRootCmd())
	if len(groups) < 3 {
		t.Fatalf("only %d command groups found", len(groups))
	}
	for _, g := range groups {
		path := strings.Fields(g.CommandPath())[1:]
		t.Run(strings.Join(path, " "), func(t *testing.T) {
			var stderr bytes.Buffer
			code := Main(append(path, "nosuch"), &stderr)
			if code != cli.ExitError || !strings.Contains(stderr.String(), `unknown command "nosuch"`) {
				t.Fatalf("exit %d, stderr %q", code, stderr.String())
			}
			if g.Runnable() {
				return // a group that does something of its own (approvals lists)
			}
			root := NewRootCmd()
			var out bytes.Buffer
			root.SetOut(&out)
			root.SetArgs(path)
			if err := root.Execute(); err != nil || !strings.Contains(out.String(), "Available Commands") {
				t.Fatalf("%v: %v\n%s", path, err, out.String())
			}
		})
	}
	var stderr bytes.Buffer
	if code := Main([]string{"policy", "tset"}, &stderr); code != cli.ExitError || !strings.Contains(stderr.String(), "did you mean test?") {
		t.Fatalf("no suggestion: exit %d, %q", code, stderr.String())
	}
}

// An agent run's limits said as 0 or less are usage mistakes, caught before
// any gateway is asked (the API reads 0 as its default).
func TestAgentLimitsRefused(t *testing.T) {
	t.Setenv("TOOLGATE_HOME", t.TempDir()) // no gateway, no token: a call would fail otherwise
	for _, tt := range []struct{ flag, value, want string }{
		{"--max-steps", "0", "--max-steps 0: give at least 1"},
		{"--max-steps", "-3", "--max-steps -3: give at least 1"},
		{"--max-tokens", "0", "--max-tokens 0: give at least 1"},
		{"--max-time", "0s", "--max-time 0s: give a positive duration"},
		{"--max-time", "-1m", "--max-time -1m0s: give a positive duration"},
	} {
		var stderr bytes.Buffer
		code := Main([]string{"agent", "demo", tt.flag, tt.value, "a task"}, &stderr)
		if code != cli.ExitError || !strings.Contains(stderr.String(), tt.want) || !strings.Contains(stderr.String(), "usage: toolgate agent") {
			t.Errorf("%s %s: exit %d, stderr %q", tt.flag, tt.value, code, stderr.String())
		}
	}
}
