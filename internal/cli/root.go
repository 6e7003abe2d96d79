package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/toolgate/toolgate/internal/cli/adminclient"
	"github.com/toolgate/toolgate/internal/proto/api"
)

// Globals are the flags every command shares.
type Globals struct {
	Home   string
	Config string
	// Context names another gateway's admin API (HOME/contexts/NAME);
	// empty: the daemon of this home.
	Context string
}

// ContextsDir holds the contexts under the home: NAME/address (host:port
// of the admin API) and NAME/admin.token.
const ContextsDir = "contexts"

// Dial is a client of the gateway the flags name: the context's, else
// the daemon of the home over its socket.
func (g *Globals) Dial() (*adminclient.Client, error) {
	if g.Context == "" {
		return adminclient.Dial(g.Home)
	}
	if strings.ContainsAny(g.Context, `/\`) || g.Context == "." || g.Context == ".." {
		return nil, fmt.Errorf("--context %q: a context is a name, not a path", g.Context)
	}
	dir := filepath.Join(g.Home, ContextsDir, g.Context)
	addr, err := os.ReadFile(filepath.Join(dir, "address"))
	if err != nil {
		return nil, fmt.Errorf("context %s: %w (write its admin API's host:port there; docs/kubernetes.md)", g.Context, err)
	}
	return adminclient.DialAddr(strings.TrimSpace(string(addr)), filepath.Join(dir, api.TokenFile))
}

// ConfigPath is the config file the flags name.
func (g *Globals) ConfigPath() string {
	if g.Config != "" {
		return g.Config
	}
	return filepath.Join(g.Home, "config.yaml")
}

// defaultHome is $TOOLGATE_HOME, else ~/.toolgate.
func defaultHome() (string, error) {
	if h := os.Getenv("TOOLGATE_HOME"); h != "" {
		return filepath.Abs(h)
	}
	u, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("cannot find the home directory (set TOOLGATE_HOME): %w", err)
	}
	return filepath.Join(u, ".toolgate"), nil
}

// Commands adds commands to the tree, given the shared flags.
type Commands func(g *Globals) []*cobra.Command

// clientCommands are the commands of this package, by name, so that Main
// can build only the one a command line runs (TestClientCommandNames keeps
// each name its command's).
var clientCommands = []struct {
	name string
	new  func(*Globals) *cobra.Command
}{
	{"agents", newAgentsCmd}, {"exec", newExecCmd}, {"read", newReadCmd},
	{"write", newWriteCmd}, {"patch", newPatchCmd}, {"call", newCallCmd},
	{"run", newRunCmd}, {"ingest", newIngestCmd},
	{"approvals", newApprovalsCmd}, {"audit", newAuditCmd}, {"labels", newLabelsCmd},
}

// NewRootCmd returns the command tree of the Go CLI (toolgate-cli): the commands
// that talk to a running gateway, and for each other command a stand-in that runs toolgate-gateway instead
// (gateway.go).
func NewRootCmd() *cobra.Command { return NewRootWith(delegated) }

// NewRootWith returns the command tree with the gateway's commands made by
// gateway: toolgate-gateway's tree when they are the real ones. A gateway
// command named as one of this package's takes its place (audit: the same
// commands, answered from the files when no gateway runs).
func NewRootWith(gateway Commands) *cobra.Command {
	g := &Globals{}
	root := newRoot(g)
	theirs := gateway(g)
	for _, c := range clientCommands {
		if !slices.ContainsFunc(theirs, func(t *cobra.Command) bool { return t.Name() == c.name }) {
			root.AddCommand(c.new(g))
		}
	}
	root.AddCommand(theirs...)
	refuseUnknownSubcommands(root)
	return root
}

// rootFor returns the tree that runs args: the root with only the command
// they name when it is one of clientCommands, else NewRootCmd's whole tree.
// Building, and then walking, every command and the completion command
// cobra adds was ~5% of a `toolgate exec`'s CPU. That command behaves the
// same in either tree: help, usage and errors are its own and the root's
// (TestRootForRunsAsWholeTree); only commands that list or search the
// root's others (help, completion, a misspelt name) need the whole tree.
func rootFor(args []string) *cobra.Command {
	name := commandName(args)
	for _, c := range clientCommands {
		if c.name == name {
			g := &Globals{}
			root := newRoot(g)
			root.AddCommand(c.new(g))
			// The completion command cannot be the one that runs.
			root.CompletionOptions.DisableDefaultCmd = true
			refuseUnknownSubcommands(root)
			return root
		}
	}
	return NewRootCmd()
}

// commandName is the first word of args after the root's flags (and their
// values): the top-level command they run. It is "" when a flag it does not
// know comes first: how that flag parses decides which word the command is.
func commandName(args []string) string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case !strings.HasPrefix(a, "-"):
			return a
		case a == "--home" || a == "--config" || a == "--context":
			i++ // its value
		case strings.HasPrefix(a, "--home=") || strings.HasPrefix(a, "--config=") || strings.HasPrefix(a, "--context="):
		default:
			return ""
		}
	}
	return ""
}

// newRoot returns the root command, with the flags every command shares
// bound to g.
func newRoot(g *Globals) *cobra.Command {
	root := &cobra.Command{
		Use:           "toolgate",
		Short:         "One chokepoint for every tool call an AI agent makes",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			if g.Home != "" {
				return nil
			}
			var err error
			g.Home, err = defaultHome()
			return err
		},
	}
	root.PersistentFlags().StringVar(&g.Home, "home", "", "toolgate home (default $TOOLGATE_HOME or ~/.toolgate)")
	root.PersistentFlags().StringVar(&g.Config, "config", "", "config file (default HOME/config.yaml)")
	root.PersistentFlags().StringVar(&g.Context, "context", "", "reach the gateway of context `NAME` (HOME/contexts/NAME: address, admin.token), e.g. one in a cluster")
	return root
}

// refuseUnknownSubcommands makes every command group fail on an argument
// that names none of its subcommands. Cobra checks that only on the root:
// `toolgate policy nosuch` printed the group's help and exited 0, so a typo
// in a script passed silently.
func refuseUnknownSubcommands(cmd *cobra.Command) {
	for _, c := range cmd.Commands() {
		refuseUnknownSubcommands(c)
	}
	if !cmd.HasParent() || !cmd.HasSubCommands() || cmd.Runnable() {
		return
	}
	cmd.Args = cobra.ArbitraryArgs
	cmd.SuggestionsMinimumDistance = 2 // cobra's default, set only on the root
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += fmt.Sprintf(" (did you mean %s?)", strings.Join(s, ", "))
		}
		return fmt.Errorf("%s\nsee: %s --help", msg, cmd.CommandPath())
	}
}
