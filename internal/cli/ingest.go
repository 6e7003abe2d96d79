package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/toolgate/toolgate/internal/adminapi"
	"github.com/toolgate/toolgate/internal/wire"
)

func newIngestCmd(g *Globals) *cobra.Command {
	cmd := &cobra.Command{Use: "ingest", Short: "Record what a transcript shows as observations"}
	var agent string
	sj := &cobra.Command{
		Use:   "stream-json --agent AGENT FILE",
		Short: "Ingest `claude -p --output-format stream-json --verbose` output (FILE or - for stdin)",
		Long: `Records tool_use, tool_result, permission decisions and denials and hook_no_verdict
warnings as audit entries of type observed. Re-ingesting a file records nothing
twice; a truncated last line is ignored. Observations are never decisions.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if agent == "" {
				return UsageErr(cmd, "--agent is required")
			}
			var in io.Reader = os.Stdin
			if args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return err
				}
				defer f.Close()
				in = f
			}
			ans, err := postObservations(cmd.Context(), g.Home, agent, in)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "recorded %d observations (%d already recorded)\n", ans.Recorded, ans.Duplicates)
			return nil
		},
	}
	sj.Flags().StringVar(&agent, "agent", "", "the agent the transcript belongs to")
	cmd.AddCommand(sj)
	return cmd
}

// postObservations streams the transcript to the daemon's
// POST /v1/agents/{agent}/observations (admin scope).
func postObservations(ctx context.Context, home, agent string, body io.Reader) (*struct{ Recorded, Duplicates int }, error) {
	tok, err := os.ReadFile(filepath.Join(home, adminapi.TokenFile))
	if err != nil {
		return nil, fmt.Errorf("reading the admin token: %w (run `toolgate init`)", err)
	}
	sock := filepath.Join(home, adminapi.SocketName)
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://toolgate/v1/agents/"+url.PathEscape(agent)+"/observations", body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	req.Header.Set("Content-Type", wire.MediaNDJSON)
	resp, err := hc.Do(req)
	if err != nil {
		if _, serr := os.Stat(sock); serr != nil {
			return nil, adminapi.ErrDaemonDown
		}
		return nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error *wire.Error `json:"error"`
		}
		if json.Unmarshal(b, &e) == nil && e.Error != nil {
			return nil, e.Error
		}
		return nil, fmt.Errorf("daemon answered %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	var ans struct{ Recorded, Duplicates int }
	if err := json.Unmarshal(b, &ans); err != nil {
		return nil, fmt.Errorf("bad answer from the daemon: %w", err)
	}
	return &ans, nil
}
