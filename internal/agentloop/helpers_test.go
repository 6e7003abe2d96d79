package agentloop_test

import (
	"bytes"
	"context"
	"io"
	"net/http"

	"github.com/toolgate/toolgate/internal/agentloop"
)

// httpModel sends straight to a provider's base URL.
type httpModel struct{ base string }

func (m httpModel) Send(ctx context.Context, r *agentloop.ModelRequest) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.base+r.Path, bytes.NewReader(r.Body))
	if err != nil {
		return nil, err
	}
	req.Header = r.Header
	return http.DefaultClient.Do(req)
}

// cancelAfter cancels the run after n answers (a user's Ctrl-C).
type cancelAfter struct {
	agentloop.Model
	n      int
	cancel context.CancelFunc
	sent   *int
}

func (m cancelAfter) Send(ctx context.Context, r *agentloop.ModelRequest) (*http.Response, error) {
	resp, err := m.Model.Send(ctx, r)
	*m.sent++
	if err != nil || *m.sent != m.n {
		return resp, err
	}
	// The whole answer first, then the interruption: the step it asks
	// for is cut, not the answer.
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	m.cancel()
	return resp, err
}
