package api

import (
	"context"
	"net/url"

	"github.com/ttfx/ttfx/internal/diagnose"
)

// Diagnosis returns GET /api/requests/{id}/diagnosis.
func (c *Client) Diagnosis(ctx context.Context, id string) (diagnose.Report, error) {
	var r diagnose.Report
	err := c.get(ctx, "/api/requests/"+url.PathEscape(id)+"/diagnosis", nil, &r)
	return r, err
}
