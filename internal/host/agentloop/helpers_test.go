package agentloop_test

import (
	"context"
	"net/http"

	"github.com/toolgate/toolgate/internal/host/agentloop"
	"github.com/toolgate/toolgate/internal/host/door/modeldoor"
)

// cancelAfter interrupts the run (a user's Ctrl-C) while it waits for
// its nth answer.
type cancelAfter struct {
	agentloop.Model
	n      int
	cancel context.CancelFunc
	sent   *int
}

func (m cancelAfter) Send(ctx context.Context, r *modeldoor.Request) (*http.Response, error) {
	*m.sent++
	if *m.sent == m.n {
		m.cancel()
	}
	return m.Model.Send(ctx, r)
}
