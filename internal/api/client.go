package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/ttfx/ttfx/internal/record"
)

// Client reads the API over HTTP, for the command line (`ttfx requests`,
// `ttfx diagnose`).
type Client struct {
	BaseURL string       // e.g. http://127.0.0.1:8080
	Key     string       // sent as Authorization: Bearer
	HTTP    *http.Client // nil: a client with a 30 s timeout
}

// APIError is an error answer of the API.
type APIError struct {
	Status  int    // HTTP status
	Type    string // one of the Type constants
	Message string
}

// Error says what the API answered.
func (e *APIError) Error() string {
	return fmt.Sprintf("%s (HTTP %d): %s", e.Type, e.Status, e.Message)
}

// maxAnswer bounds what the client reads: a page of 1000 records is about
// 2 MB.
const maxAnswer = 64 << 20

func (c *Client) get(ctx context.Context, path string, q url.Values, into any) error {
	u := strings.TrimRight(c.BaseURL, "/") + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	if c.Key != "" {
		req.Header.Set("Authorization", "Bearer "+c.Key)
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e ErrorBody
		if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
			return &APIError{Status: resp.StatusCode, Type: e.Error.Type, Message: e.Error.Message}
		}
		return &APIError{Status: resp.StatusCode, Type: "http_error", Message: strings.TrimSpace(string(body[:min(len(body), 200)]))}
	}
	if err := json.Unmarshal(body, into); err != nil {
		return fmt.Errorf("decode %s: %w", path, err)
	}
	return nil
}

// Requests lists records; q holds the filters of GET /api/requests.
func (c *Client) Requests(ctx context.Context, q url.Values) (ListResponse, error) {
	var l ListResponse
	err := c.get(ctx, "/api/requests", q, &l)
	return l, err
}

// Request returns one record.
func (c *Client) Request(ctx context.Context, id string) (record.Record, error) {
	var r record.Record
	err := c.get(ctx, "/api/requests/"+url.PathEscape(id), nil, &r)
	return r, err
}

// Stats returns the summary GET /api/stats gives for q.
func (c *Client) Stats(ctx context.Context, q url.Values) (StatsResponse, error) {
	var s StatsResponse
	err := c.get(ctx, "/api/stats", q, &s)
	return s, err
}

// Health returns GET /api/health.
func (c *Client) Health(ctx context.Context) (HealthResponse, error) {
	var h HealthResponse
	err := c.get(ctx, "/api/health", nil, &h)
	return h, err
}

// AwaitRequest returns one record, waiting up to wait for it to appear: the
// gateway writes a request's record off the request path, just after the
// response ended, so a client that reads it back at once may be early. Only
// "not found" is retried; any other error is returned at once.
func (c *Client) AwaitRequest(ctx context.Context, id string, wait time.Duration) (record.Record, error) {
	deadline := time.Now().Add(wait)
	for {
		r, err := c.Request(ctx, id)
		var ae *APIError
		if err == nil || !errors.As(err, &ae) || ae.Status != http.StatusNotFound || time.Now().After(deadline) {
			return r, err
		}
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}
