package witness

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/internal/proto/proof"
	"golang.org/x/mod/sumdb/tlog"
)

// ErrRefused wraps a witness's refusal of a checkpoint: a fork, a tree
// smaller than one it cosigned, a signature it does not trust.
var ErrRefused = errors.New("the witness refused the checkpoint")

// Client sends one log's checkpoints to one witness.
type Client struct {
	URL  string // the submission prefix; add-checkpoint is under it
	HTTP *http.Client
	// cosigned is the size the witness last cosigned, as far as known:
	// 0 at first, learned from its 409.
	cosigned int64
}

// Submit asks the witness to cosign the signed checkpoint cp, proving it
// consistent with the one it last cosigned from hashes (the log's tree),
// and returns its cosignature lines.
func (c *Client) Submit(ctx context.Context, cp []byte, hashes tlog.HashReader) ([]byte, error) {
	n, err := checkpointSize(cp)
	if err != nil {
		return nil, err
	}
	for try := 0; try < 2; try++ {
		var body bytes.Buffer
		fmt.Fprintf(&body, "old %d\n", c.cosigned)
		if c.cosigned > 0 && c.cosigned < n {
			p, err := tlog.ProveTree(n, c.cosigned, hashes)
			if err != nil {
				return nil, fmt.Errorf("witness: proving %d consistent with %d: %v", n, c.cosigned, err)
			}
			for _, h := range p {
				body.WriteString(base64.StdEncoding.EncodeToString(h[:]) + "\n")
			}
		}
		body.WriteString("\n")
		body.Write(cp)
		status, answer, ctype, err := c.post(ctx, body.Bytes())
		if err != nil {
			return nil, err
		}
		switch {
		case status == http.StatusOK:
			c.cosigned = n
			return answer, nil
		case status == http.StatusConflict && strings.HasPrefix(ctype, "text/x.tlog.size") && try == 0:
			size, err := strconv.ParseInt(strings.TrimSpace(string(answer)), 10, 64)
			if err != nil || size < 0 {
				return nil, fmt.Errorf("witness %s: a 409 whose size is %q", c.URL, answer)
			}
			if size > n {
				return nil, fmt.Errorf("%w: it cosigned a tree of %d entries, this checkpoint has %d (a log restored from an old copy?)", ErrRefused, size, n)
			}
			c.cosigned = size
		default:
			return nil, fmt.Errorf("%w: %s %d: %s", ErrRefused, c.URL, status, strings.TrimSpace(string(answer)))
		}
	}
	return nil, fmt.Errorf("witness %s: no agreement on the size it cosigned", c.URL)
}

func (c *Client) post(ctx context.Context, body []byte) (int, []byte, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(c.URL, "/")+"/add-checkpoint", bytes.NewReader(body))
	if err != nil {
		return 0, nil, "", err
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, "", fmt.Errorf("witness %s: %w", c.URL, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, answer, resp.Header.Get("Content-Type"), err
}

// checkpointSize is the size a signed checkpoint states (its signature is
// the witness's to check).
func checkpointSize(cp []byte) (int64, error) {
	text, _, ok := bytes.Cut(cp, []byte("\n\n"))
	if !ok {
		return 0, errors.New("witness: not a signed checkpoint")
	}
	c, err := proof.ParseCheckpoint(string(text) + "\n")
	if err != nil {
		return 0, err
	}
	return c.Size, nil
}

// Cosign appends a witness's cosignature lines to the signed checkpoint cp.
func Cosign(cp, sigs []byte) []byte {
	return append(append([]byte(nil), cp...), sigs...)
}
