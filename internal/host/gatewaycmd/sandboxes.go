package gatewaycmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/toolgate/toolgate/internal/cli"
	"github.com/toolgate/toolgate/internal/cli/adminclient"
	"github.com/toolgate/toolgate/internal/host/daemon"
	"github.com/toolgate/toolgate/internal/host/sandbox"
	"github.com/toolgate/toolgate/internal/host/sandbox/lifecycle"
	"github.com/toolgate/toolgate/internal/lib/textsafe"
	"github.com/toolgate/toolgate/internal/proto/api"
)

// sandboxes is how a lifecycle command reaches the home's sandboxes: the
// gateway serving the home, which records each action, or, with none, the
// backend itself under the home's lock (nothing recorded).
type sandboxes struct {
	ops *lifecycle.Ops      // no gateway serves the home
	c   *adminclient.Client // the gateway serving it
}

// withSandboxes runs use with the home's sandboxes, then lets go of them.
func withSandboxes(cmd *cobra.Command, g *cli.Globals, use func(s sandboxes) error) error {
	if g.Context == "" {
		ops, release, err := daemon.OfflineSandboxes(cmd.Context(), g.Home, g.ConfigPath())
		if err == nil {
			defer release()
			return use(sandboxes{ops: ops})
		}
		if !errors.Is(err, daemon.ErrServing) {
			return err
		}
	}
	c, err := g.Dial()
	if err != nil {
		return err
	}
	return use(sandboxes{c: c})
}

func (s sandboxes) list(ctx context.Context) ([]api.Sandbox, error) {
	if s.c != nil {
		return s.c.Sandboxes(ctx)
	}
	return s.ops.List(ctx)
}

func (s sandboxes) act(ctx context.Context, agent, action string, a api.SandboxAction) (api.SandboxActed, error) {
	if s.c != nil {
		return s.c.SandboxAct(ctx, agent, action, a)
	}
	return s.ops.Act(ctx, action, agent, a)
}

func (s sandboxes) prune(ctx context.Context, a api.SandboxAction) (api.SandboxActed, error) {
	if s.c != nil {
		return s.c.PruneSandboxes(ctx, a)
	}
	return s.ops.Prune(ctx, a)
}

// lifecycleCmds are sandbox ls, stop, rm and prune.
func lifecycleCmds(g *cli.Globals) []*cobra.Command {
	var asJSON bool
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List every toolgate sandbox on the backend: this home's, and other homes' left behind",
		Long: `Lists every sandbox toolgate made on this home's backend (the Docker Engine, or
the cluster's namespace), with where each stands for this home: configured (an
agent of its config), not configured (an agent taken out of it), other home,
left behind (of a home that is gone: no config.yaml there) or home unknown. For
this home's agents it shows the calls in flight, when a gateway serves it, and
the size of each workspace on this host.`,
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return withSandboxes(cmd, g, func(s sandboxes) error {
				rows, err := s.list(cmd.Context())
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(os.Stdout, rows)
				}
				printSandboxes(os.Stdout, rows, time.Now())
				return nil
			})
		},
	}
	ls.Flags().BoolVar(&asJSON, "json", false, "print them as JSON")

	var a api.SandboxAction
	act := func(action, use, short, long string) *cobra.Command {
		cmd := &cobra.Command{
			Use: use, Short: short, Long: long,
			Args: cli.Words(1, 1, "AGENT"),
			RunE: func(cmd *cobra.Command, args []string) error {
				return withSandboxes(cmd, g, func(s sandboxes) error {
					ans, err := s.act(cmd.Context(), args[0], action, a)
					if err != nil {
						return err
					}
					printActed(os.Stdout, ans, args[0], s.c != nil)
					return nil
				})
			},
		}
		cmd.Flags().BoolVar(&a.Force, "force", false, "act even with calls in flight (they are cut)")
		return cmd
	}
	stop := act("stop", "stop AGENT", "Stop an agent's sandbox; its next call starts it again",
		`Stops the agent's sandbox container, keeping it and its workspace; the agent's
next call starts it again. On Kubernetes a pod cannot stop: it is deleted and
its workspace claim kept, as rm does. With calls in flight it refuses, unless
--force. When a gateway serves the home the stop is on its audit record.`)
	rm := act("rm", "rm AGENT", "Remove an agent's sandbox (its workspace only with --workspace)",
		`Removes the agent's sandbox; its next call makes it anew on the same
workspace. The workspace stays unless --workspace, which deletes the
configured workspace directory too (not on Kubernetes, where it is a claim).
With calls in flight it refuses, unless --force. When a gateway serves the
home the removal is on its audit record.`)
	rm.Flags().BoolVar(&a.Workspace, "workspace", false, "delete the agent's workspace directory too")

	var p api.SandboxAction
	prune := &cobra.Command{
		Use:   "prune",
		Short: "Remove the sandboxes nothing uses: of agents no longer configured, of homes that are gone",
		Long: `Removes this home's sandboxes of agents no longer in its config, and sandboxes
of other homes that are gone (no config.yaml there any more). Sandboxes of
homes that did not say where they are (made by an older toolgate) stay unless
--unknown. Workspaces stay unless --workspaces, which deletes those of this
home's pruned agents that lie inside the home. --dry-run lists what would go.`,
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return withSandboxes(cmd, g, func(s sandboxes) error {
				ans, err := s.prune(cmd.Context(), p)
				printActed(os.Stdout, ans, "", s.c != nil)
				return err
			})
		},
	}
	prune.Flags().BoolVar(&p.DryRun, "dry-run", false, "list what would be removed; remove nothing")
	prune.Flags().BoolVar(&p.Unknown, "unknown", false, "also remove sandboxes whose home is unknown")
	prune.Flags().BoolVar(&p.Workspaces, "workspaces", false, "also delete the pruned agents' workspaces inside this home")
	return []*cobra.Command{ls, stop, rm, prune}
}

// printJSON prints v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func printSandboxes(w io.Writer, rows []api.Sandbox, now time.Time) {
	if len(rows) == 0 {
		fmt.Fprintln(w, "no toolgate sandboxes")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tPLACE\tSTATE\tRUNTIME\tIMAGE\tAGE\tWORKSPACE\tCALLS\tNAME")
	for _, r := range rows {
		place := r.Place
		if r.Home != "" && r.Place != sandbox.PlaceHere && r.Place != sandbox.PlaceUnused {
			place += " " + r.Home
		}
		runtime := r.Runtime
		if runtime == "" {
			runtime = "default"
		}
		age := "-"
		if !r.Created.IsZero() {
			age = now.Sub(r.Created).Round(time.Second).String()
		}
		size := "-"
		if r.WorkspaceBytes >= 0 {
			size = bytesOf(r.WorkspaceBytes)
		}
		calls := "-"
		if r.Place == sandbox.PlaceHere {
			calls = fmt.Sprintf("%d", r.InFlight)
			if r.Waiting > 0 {
				calls += fmt.Sprintf(" (+%d waiting)", r.Waiting)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", textsafe.Line(r.Agent), textsafe.Line(place), textsafe.Line(r.State),
			textsafe.Line(runtime), textsafe.Line(r.Image), age, size, calls, textsafe.Line(r.Name))
	}
	tw.Flush()
}

// printActed says what a stop, rm or prune did, and whether it is on
// the record.
func printActed(w io.Writer, ans api.SandboxActed, agent string, served bool) {
	verb := map[string]string{lifecycle.ToolStop: "stopped", lifecycle.ToolRemove: "removed", lifecycle.ToolPrune: "removed"}[ans.Action]
	if ans.DryRun {
		verb = "would remove"
	}
	if len(ans.Sandboxes) == 0 && len(ans.Workspaces) == 0 {
		if agent != "" {
			fmt.Fprintf(w, "agent %s has no sandbox\n", textsafe.Line(agent))
		} else {
			fmt.Fprintln(w, "nothing to prune")
		}
		return
	}
	for _, r := range ans.Sandboxes {
		fmt.Fprintf(w, "%s %s (agent %s, %s)\n", verb, textsafe.Line(r.Name), textsafe.Line(r.Agent), textsafe.Line(r.Place))
	}
	for _, ws := range ans.Workspaces {
		if ans.DryRun {
			fmt.Fprintf(w, "would delete workspace %s\n", textsafe.Line(ws))
		} else {
			fmt.Fprintf(w, "deleted workspace %s\n", textsafe.Line(ws))
		}
	}
	switch {
	case ans.DryRun:
	case len(ans.Entries) > 0:
		fmt.Fprintf(w, "on the audit record: %v\n", ans.Entries)
	case !served:
		fmt.Fprintln(w, "(no gateway serves this home: not on its audit record)")
	}
}

// bytesOf spells a size as people read it.
func bytesOf(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
