package witness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/host/audit"
	"golang.org/x/mod/sumdb/note"
)

// CosignedFile holds the latest checkpoint with the witnesses'
// cosignatures, beside the log's own checkpoint file.
const CosignedFile = "checkpoint.cosigned"

// Cosigner sends a gateway's checkpoints to its witnesses and keeps the
// latest one they cosigned.
type Cosigner struct {
	dir       string
	log       *slog.Logger
	witnesses []witnessClient

	mu   sync.Mutex // one round at a time: each client knows its witness's size
	last []byte     // the last checkpoint sent
}

type witnessClient struct {
	*Client
	key note.Verifier
}

// Peer names one witness of a gateway: its URL and verifier key.
type Peer struct {
	URL, Key string
}

// NewCosigner sends the checkpoints of the log in dir to ws.
func NewCosigner(dir string, ws []Peer, log *slog.Logger) (*Cosigner, error) {
	c := &Cosigner{dir: dir, log: log}
	for _, w := range ws {
		v, err := note.NewVerifier(w.Key)
		if err != nil {
			return nil, fmt.Errorf("witness %s: key: %v", w.URL, err)
		}
		c.witnesses = append(c.witnesses, witnessClient{Client: &Client{URL: w.URL, HTTP: &http.Client{Timeout: 10 * time.Second}}, key: v})
	}
	return c, nil
}

// Cosign sends cp to every witness and returns it with the cosignatures
// that came back and verify; a witness that refused or was unreachable is
// in the error (its cosignature is missing, the rest are kept).
func (c *Cosigner) Cosign(ctx context.Context, cp []byte) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	hashes, done, err := audit.TreeHashes(c.dir)
	if err != nil {
		return cp, err
	}
	defer done()
	out := append([]byte(nil), cp...)
	var errs []error
	for _, w := range c.witnesses {
		sigs, err := w.Submit(ctx, cp, hashes)
		if err == nil {
			_, err = note.Open(Cosign(cp, sigs), note.VerifierList(w.key))
			if err != nil {
				err = fmt.Errorf("witness %s: its cosignature does not verify with its key: %v", w.URL, err)
			}
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, sigs...)
	}
	c.last = cp
	if len(out) > len(cp) {
		if werr := os.WriteFile(filepath.Join(c.dir, CosignedFile), out, 0o600); werr != nil {
			errs = append(errs, werr)
		}
	}
	return out, errors.Join(errs...)
}

// Follow cosigns each checkpoint the log writes, looking every poll,
// until ctx ends. A refusal is an alarm: the witness saw another history.
func (c *Cosigner) Follow(ctx context.Context, every time.Duration) {
	audit.Follow(ctx, audit.FollowOptions{What: "witness cosigning", Log: c.log, Every: every,
		Step: func(ctx context.Context) error {
			cp, err := audit.LatestCheckpoint(c.dir)
			if errors.Is(err, os.ErrNotExist) {
				return nil
			}
			if err != nil {
				return err
			}
			c.mu.Lock()
			same := bytes.Equal(cp, c.last)
			c.mu.Unlock()
			if same {
				return nil
			}
			_, err = c.Cosign(ctx, cp)
			if errors.Is(err, ErrRefused) {
				c.log.Error("a witness refused this gateway's checkpoint: it cosigned another history of this log", "err", err)
			}
			return err
		}})
}
