package adminclient

import (
	"context"

	"github.com/toolgate/toolgate/internal/proto/api"
	"github.com/toolgate/toolgate/internal/proto/auditquery"
)

// AuditFind asks the daemon's audit index (caught up first) for the entries
// q selects.
func (c *Client) AuditFind(ctx context.Context, q auditquery.Query) ([]auditquery.Hit, error) {
	path := "/v1/audit/entries"
	if v := q.Values(); len(v) > 0 {
		path += "?" + v.Encode()
	}
	var ans struct {
		Hits []auditquery.Hit `json:"hits"`
	}
	return ans.Hits, c.json(ctx, "GET", path, nil, &ans)
}

// AuditReindex has the daemon rebuild its audit index from the log.
func (c *Client) AuditReindex(ctx context.Context) (*api.Reindexed, error) {
	var ans api.Reindexed
	return &ans, c.json(ctx, "POST", "/v1/audit/reindex", nil, &ans)
}

// AuditCheckpoint has the daemon sign a checkpoint of its audit log now:
// one that covers every entry written so far, for a receipt of them.
func (c *Client) AuditCheckpoint(ctx context.Context) (*api.Checkpointed, error) {
	var ans api.Checkpointed
	return &ans, c.json(ctx, "POST", "/v1/audit/checkpoint", nil, &ans)
}
