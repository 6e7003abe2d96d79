package gatewaycmd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/toolgate/toolgate/internal/cli"
	"github.com/toolgate/toolgate/internal/host/witness"
	"github.com/toolgate/toolgate/internal/proto/proof"
)

func newWitnessCmd(g *cli.Globals) *cobra.Command {
	var dir, listen, name string
	var logs []string
	cmd := &cobra.Command{
		Use:   "witness",
		Short: "Run a witness: cosign gateways' audit checkpoints that are consistent with what it saw before",
		Long: `Run a transparency-log witness (C2SP tlog-witness's add-checkpoint) for the gateways whose
keys --log names (toolgate id prints a gateway's). It cosigns a checkpoint only when the
gateway's key signed it and it is consistent with the last one it cosigned for that gateway
(an RFC 6962 consistency proof); it refuses a rewritten history or a log restored from an
old copy, keeps the refused request under DIR/evidence, and remembers across restarts
(DIR/state.json: a witness whose state is lost must be retired, not started afresh).

Run it on another host than the gateways it witnesses, and give its key (printed at start,
DIR/witness.key.pub) to the gateways (gateway.audit.witnesses) and to whoever verifies
receipts (--witness-key).`,
		Example: "  toolgate witness --name witness.example/w1 --listen 127.0.0.1:7434 --log 'toolgate/gw-…+…+…'",
		Args:    cli.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if dir == "" {
				dir = filepath.Join(g.Home, "witness")
			}
			keys, err := proof.KeyArgs(logs)
			if err != nil {
				return err
			}
			w, err := witness.Open(dir, name, keys, nil)
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "witness %s on http://%s for %d gateway key(s); its key:\n  %s\n", dir, ln.Addr(), len(keys), w.Verifier())
			srv := &http.Server{Handler: w.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			go func() {
				<-ctx.Done()
				sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_ = srv.Shutdown(sctx)
			}()
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "the witness's key and state (default HOME/witness)")
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:7434", "the address to serve add-checkpoint on")
	cmd.Flags().StringVar(&name, "name", "", "the witness's name, for its key the first time (e.g. witness.example/w1)")
	cmd.Flags().StringArrayVar(&logs, "log", nil, "a gateway's verifier key, or a file of keys (repeatable)")
	return cmd
}
