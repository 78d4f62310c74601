package client

import (
	"context"

	"github.com/sextantmq/sextant/internal/adminapi"
)

// Placement is GET /v1/placement: every placement group with its home and
// the metadata leader's last placement round.
func (c *Client) Placement(ctx context.Context) (adminapi.PlacementInfo, error) {
	var p adminapi.PlacementInfo
	return p, c.do(ctx, "GET", "/v1/placement", nil, &p)
}
