package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/internal/proto/api"
)

func TestDefaultHome(t *testing.T) {
	t.Setenv("TOOLGATE_HOME", "/srv/tg")
	if h, err := defaultHome(); err != nil || h != "/srv/tg" {
		t.Errorf("defaultHome() = %q, %v", h, err)
	}
	t.Setenv("TOOLGATE_HOME", "")
	t.Setenv("HOME", "/home/x")
	if h, err := defaultHome(); err != nil || h != "/home/x/.toolgate" {
		t.Errorf("defaultHome() = %q, %v", h, err)
	}
}

// TestDialContext: --context names a gateway by its address and token
// under HOME/contexts; without it the home's daemon is dialled; a context
// that is missing or a path is refused.
func TestDialContext(t *testing.T) {
	home := t.TempDir()
	dir := filepath.Join(home, ContextsDir, "k8s")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"address": "127.0.0.1:7433\n", api.TokenFile: "tok\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(home, api.TokenFile), []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ context, wantErr string }{
		{"", ""},
		{"k8s", ""},
		{"nope", "context nope"},
		{"../k8s", "a context is a name, not a path"},
		{"..", "a context is a name, not a path"},
	}
	for _, tt := range tests {
		g := &Globals{Home: home, Context: tt.context}
		c, err := g.Dial()
		switch {
		case tt.wantErr == "" && (err != nil || c == nil):
			t.Errorf("context %q: %v", tt.context, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("context %q: %v, want an error naming %q", tt.context, err, tt.wantErr)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "address"), []byte("no port"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := (&Globals{Home: home, Context: "k8s"}).Dial(); err == nil || !strings.Contains(err.Error(), "want host:port") {
		t.Errorf("a bad address: %v", err)
	}
}

func TestClientCommandNames(t *testing.T) {
	for _, c := range clientCommands {
		cmd := c.new(&Globals{})
		if cmd.Name() != c.name || len(cmd.Aliases) > 0 {
			t.Errorf("clientCommands lists %q for the command %q (aliases %v)", c.name, cmd.Name(), cmd.Aliases)
		}
	}
}

func TestCommandName(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"exec", "demo", "--", "true"}, "exec"},
		{[]string{"--home", "/h", "exec", "demo"}, "exec"},
		{[]string{"--home=/h", "--context", "k8s", "--config", "c.yaml", "read"}, "read"},
		{[]string{"--home", "--context", "exec"}, "exec"}, // --context is --home's value
		{[]string{"--home", "exec"}, ""},
		{[]string{"--verbose", "exec"}, ""},
		{[]string{"-h", "exec"}, ""},
		{[]string{"--", "exec"}, ""},
		{[]string{"-"}, ""},
		{nil, ""},
	}
	for _, tt := range tests {
		if got := commandName(tt.args); got != tt.want {
			t.Errorf("commandName(%q) = %q, want %q", tt.args, got, tt.want)
		}
	}
}

// TestRootForRunsAsWholeTree: a command line run in the tree rootFor
// builds for it prints and exits exactly as in the whole tree: help,
// usage errors, flag errors, and a failure before the daemon is reached.
func TestRootForRunsAsWholeTree(t *testing.T) {
	home := t.TempDir() // no admin token: a call fails before dialling
	lines := [][]string{
		{"exec"}, {"exec", "demo"}, {"exec", "demo", "--bogus"}, {"exec", "demo", "-e", "X", "--", "true"},
		{"exec", "demo", "--", "true"}, {"--context", "k8s", "exec", "demo", "--", "true"},
		{"--context", "../x", "exec", "demo", "-c", "true"},
		{"run", "demo"}, {"run", "demo", "--session", "a b", "--", "true"}, {"run", "demo", "--", "claude", "--bare"},
		{"call", "demo"}, {"read", "demo"}, {"write", "demo"}, {"patch", "demo"}, {"ingest"}, {"agents", "x"},
		{"approvals", "nosuch"}, {"approvals", "approve"}, {"approvals", "deny", "id", "--bogus"},
	}
	for _, c := range clientCommands {
		lines = append(lines, []string{c.name, "--help"}, []string{"--home=" + home, c.name, "-h"}, []string{c.name})
		for _, sub := range c.new(&Globals{}).Commands() {
			lines = append(lines, []string{c.name, sub.Name(), "--help"})
		}
	}
	run := func(root *cobra.Command, args []string) string {
		var out, errOut bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&errOut)
		code := Run(root, args, &errOut)
		return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	for _, line := range lines {
		args := append([]string{"--home", home}, line...)
		if commandName(args) != line[0] && !strings.HasPrefix(line[0], "--") {
			t.Fatalf("%q: commandName = %q", args, commandName(args))
		}
		if n := len(rootFor(args).Commands()); n > 2 { // the command and cobra's help
			t.Errorf("%q: rootFor built %d commands", args, n)
		}
		if got, want := run(rootFor(args), args), run(NewRootCmd(), args); got != want {
			t.Errorf("toolgate %s\nin rootFor's tree:\n%s\nin the whole tree:\n%s", strings.Join(args, " "), got, want)
		}
	}
}
