package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/ttfx/ttfx/internal/api"
	"github.com/ttfx/ttfx/internal/auth"
)

// apiError is an error answer of the read API, passed on to the browser
// with its status and text.
type apiError struct {
	Code    int
	Type    string
	Message string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.Code, e.Type, e.Message) }

func asAPIError(err error, target **apiError) bool { return errors.As(err, target) }

// captured is a ResponseWriter that keeps an in-process answer.
type captured struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (c *captured) Header() http.Header { return c.header }
func (c *captured) Write(b []byte) (int, error) {
	if c.code == 0 {
		c.code = http.StatusOK
	}
	return c.body.Write(b)
}
func (c *captured) WriteHeader(code int) {
	if c.code == 0 {
		c.code = code
	}
}

// call GETs path?q from the read API in-process, as the browser's caller:
// the caller's key goes along, so the API decides what it may read. A 2xx
// answer is decoded into out; any other is returned as an *apiError.
func (h *Handler) call(ctx context.Context, from *http.Request, path string, q url.Values, out any) error {
	u := path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("read api %s: %w", path, err)
	}
	req.RemoteAddr = from.RemoteAddr
	req.Header.Set("Authorization", "Bearer "+auth.FromRequest(from))
	c := &captured{header: http.Header{}}
	h.opts.API.ServeHTTP(c, req)
	if c.code == 0 {
		c.code = http.StatusOK
	}
	if c.code/100 == 3 {
		// The read API never redirects; its mux does, to the cleaned
		// path, for a path with . or .. segments (a request id of
		// "%2e%2e"). Passing that on would be a redirect without a
		// Location: nothing is there.
		return &apiError{Code: http.StatusNotFound, Type: api.TypeNotFound, Message: "no such resource: " + api.Clip(path, api.MaxEcho)}
	}
	if c.code/100 != 2 {
		var eb api.ErrorBody
		if json.Unmarshal(c.body.Bytes(), &eb) != nil || eb.Error.Message == "" {
			eb.Error = api.ErrorDetail{Type: api.TypeAPI, Message: fmt.Sprintf("the read API answered %d to %s", c.code, path)}
		}
		return &apiError{Code: c.code, Type: eb.Error.Type, Message: eb.Error.Message}
	}
	if err := json.Unmarshal(c.body.Bytes(), out); err != nil {
		return fmt.Errorf("read api %s: decode: %w", path, err)
	}
	return nil
}
