package gatewaycmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/toolgate/toolgate/internal/cli"
	"github.com/toolgate/toolgate/internal/host/auth"
	"github.com/toolgate/toolgate/internal/host/config"
)

func newTokenCmd(g *cli.Globals) *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "Create, list and revoke scoped bearer tokens",
		Long: `Tokens are stored hashed in HOME/tokens.json; the secret is printed once, at creation.
Scopes: admin (the admin API), mcp (the MCP door as one agent), skills (only the skills
resources of the MCP door; global skills, plus the agent's with --agent), viewer (only
the read-only dashboard at /ui: it calls no tool and changes nothing).
A running daemon sees changes at its next request.`}
	store := func() (*auth.Store, error) { return auth.OpenStore(filepath.Join(g.Home, auth.StoreFile)) }

	var agent, scope string
	var ttl time.Duration
	var asJSON bool
	create := &cobra.Command{
		Use:     "create --scope SCOPE [--agent NAME] [--ttl 24h]",
		Short:   "Create a token and print its secret (shown only this once)",
		Example: "  toolgate token create --agent demo --scope mcp\n  toolgate token create --scope skills --ttl 24h\n  toolgate token create --scope viewer --ttl 8h",
		Args:    cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := agentConfigured(g, agent); err != nil {
				return err
			}
			s, err := store()
			if err != nil {
				return err
			}
			secret, tok, err := s.Create(auth.Scope(scope), agent, ttl)
			if err != nil {
				return err
			}
			if asJSON {
				out := struct {
					ID      string     `json:"id"`
					Secret  string     `json:"secret"`
					Scope   auth.Scope `json:"scope"`
					Agent   string     `json:"agent,omitempty"`
					Expires *time.Time `json:"expires,omitempty"`
				}{tok.ID, secret, tok.Scope, tok.Agent, tok.Expires}
				return json.NewEncoder(cmd.OutOrStdout()).Encode(out)
			}
			fmt.Fprintf(os.Stderr, "token %s (scope %s%s) created; the secret is not stored and will not be shown again:\n", tok.ID, tok.Scope, agentNote(tok.Agent))
			fmt.Println(secret)
			return nil
		},
	}
	create.Flags().StringVar(&scope, "scope", "", "admin, mcp, skills or viewer (required)")
	create.Flags().StringVar(&agent, "agent", "", "the agent an mcp token acts for (required for mcp; optional for skills)")
	create.Flags().DurationVar(&ttl, "ttl", 0, "lifetime, e.g. 24h (default: until revoked)")
	create.Flags().BoolVar(&asJSON, "json", false, "print id, secret, scope, agent and expiry as one JSON object on stdout (for scripts)")
	_ = create.MarkFlagRequired("scope")

	list := &cobra.Command{
		Use:   "list",
		Short: "List tokens (never their secrets)",
		Args:  cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := store()
			if err != nil {
				return err
			}
			toks, err := s.List()
			if err != nil {
				return err
			}
			now := time.Now()
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSCOPE\tAGENT\tCREATED\tEXPIRES\tLAST USED")
			for _, t := range toks {
				exp, used := "never", "never"
				if t.Expires != nil {
					exp = t.Expires.Local().Format(time.DateTime)
					if t.Expired(now) {
						exp += " (expired)"
					}
				}
				if t.LastUsed != nil {
					used = t.LastUsed.Local().Format(time.DateTime)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Scope, dash(t.Agent), t.Created.Local().Format(time.DateTime), exp, used)
			}
			return tw.Flush()
		},
	}

	revoke := &cobra.Command{
		Use:   "revoke ID...",
		Short: "Revoke tokens; the daemon refuses them from its next request",
		Args:  cli.Words(1, -1, "ID..."),
		RunE: func(cmd *cobra.Command, ids []string) error {
			s, err := store()
			if err != nil {
				return err
			}
			for _, id := range ids {
				if err := s.Revoke(id); err != nil {
					return err
				}
				fmt.Fprintf(os.Stderr, "token %s revoked\n", id)
			}
			return nil
		},
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func agentNote(agent string) string {
	if agent == "" {
		return ""
	}
	return ", agent " + agent
}

// agentConfigured refuses a token for an agent the config does not define:
// a misspelt name would make a token that reaches nothing. Without a config
// file (a home that only holds tokens) there is nothing to check against.
func agentConfigured(g *cli.Globals, agent string) error {
	if agent == "" {
		return nil
	}
	cfg, err := config.Load(g.Home, g.Config)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, ok := cfg.Agents[agent]; !ok {
		return fmt.Errorf("no agent %q in %s (there are: %s)", agent, g.ConfigPath(), strings.Join(slices.Sorted(maps.Keys(cfg.Agents)), ", "))
	}
	return nil
}
