package wire

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// Setting is one channel key of the configuration that a kind reads besides
// the common ones (name, protocol, base_url, key_env, region, …): Vertex's
// project and location, an Entra ID tenant, a Bedrock profile. The keys sit
// flat in the channel's entry, as the common ones do.
type Setting struct {
	// Name is the key in the configuration ("project").
	Name string
	// Doc says what the value is, for error messages and docs.
	Doc string
	// Required marks a key a channel of the kind must have.
	Required bool
}

// ChannelConfig is a channel's configuration as a kind's Open reads it.
type ChannelConfig struct {
	Name   string   // the channel's name, for error messages
	Base   *url.URL // base_url (the kind's DefaultBaseURL when not configured)
	Key    string   // the static key from key_env or key_file; "" when none
	Region string   // the channel's region key
	// Settings are the kind's own keys (Kind.Settings) as configured,
	// except that a key ending in _file holds an absolute path (relative
	// ones resolve against the configuration's directory).
	Settings map[string]string
	// Env holds, for each setting ending in _env, the value of the
	// environment variable it names (the configuration refuses an unset
	// one, as it does for key_env).
	Env map[string]string
	// Client is the HTTP client a kind fetches credentials with (token
	// endpoints); nil is http.DefaultClient.
	Client *http.Client
}

// Upstream is what a kind built for one channel from its configuration, once
// per configuration (Kind.Open): the request path only reads it. Each nil
// field falls back to the kind's own (Kind.URL, Kind.Authorize with the
// channel's static key, the client's body unchanged).
type Upstream struct {
	// URL builds the upstream URL of a request (the model into the path,
	// the project and location of the channel).
	URL func(t Target) *url.URL
	// Body rewrites the request body for the upstream (a version member
	// added, "model" dropped when the URL carries it). It must not modify
	// body, which later attempts send again, and returns the body to send.
	// An error fails the attempt as a request the gateway could not build.
	Body func(t Target, body []byte) ([]byte, error)
	// Credentials authorize each request (an OAuth2 token, a request
	// signature); nil uses Kind.Authorize with the static key.
	Credentials Credentials
}

// Credentials authorize upstream requests of one channel with credentials
// that are not a static key. Implementations refresh what expires off the
// request path (see TokenCache) and are safe for concurrent use.
type Credentials interface {
	// Authorize sets the credentials on req. body is the final request
	// body when SignsBody is true (a signer hashes it), else nil. waited is
	// how long the call waited for a credential fetched on this request's
	// path (the record's upstream_auth_ms), 0 when a cached one served. An
	// error fails the attempt; it should say which endpoint failed and
	// never include a secret.
	Authorize(ctx context.Context, req *http.Request, body []byte) (waited time.Duration, err error)
	// SignsBody reports whether Authorize needs the final body.
	SignsBody() bool
}

// CredentialError is a failure to get a channel's credentials (a token
// endpoint that refused or did not answer). The relay answers it as an
// attempt that could not be made, naming the credentials, not the model.
type CredentialError struct {
	Channel string
	Err     error
}

func (e *CredentialError) Error() string {
	return fmt.Sprintf("channel %s: cannot get upstream credentials: %v", e.Channel, e.Err)
}

func (e *CredentialError) Unwrap() error { return e.Err }

// Token is a bearer token and when it expires.
type Token struct {
	Value  string
	Expiry time.Time // zero: does not expire
}

// TokenCache is Credentials from a token endpoint: it sets
// "Authorization: Bearer TOKEN" from a cached token and refreshes the token
// before it expires, off the request path. A request waits for a fetch only
// when no valid token is cached (the first request before the warm-up fetch
// ended, or a channel unused for longer than a token lives); that wait is
// what Authorize reports.
//
// Refreshing: a token is refreshed Margin before its expiry (at most half
// its lifetime before), by a timer, as long as the channel was used since
// the previous fetch; a channel no request uses (one a reload removed)
// stops refreshing after one lifetime instead of running forever, and needs
// no Close. A request that finds the token due for refresh and no refresh
// running starts one in the background and is served the current token.
type TokenCache struct {
	fetch  func(context.Context) (Token, error)
	margin time.Duration
	now    func() time.Time
	name   string

	cur  atomic.Pointer[cachedToken]
	used atomic.Bool // a request used the token since the last fetch

	mu       sync.Mutex // guards inflight, timer, lastErr, retryAt
	inflight *fetchCall
	timer    *time.Timer
	lastErr  error
	retryAt  time.Time // no background refresh before (after a failed one)
}

type cachedToken struct {
	header    []string // {"Bearer TOKEN"}: shared, never modified
	expiry    time.Time
	refreshAt time.Time
}

type fetchCall struct {
	done chan struct{}
	tok  *cachedToken
	err  error
}

// TokenCacheOptions configure a TokenCache.
type TokenCacheOptions struct {
	// Channel names the channel in errors.
	Channel string
	// Margin is how long before its expiry a token is refreshed; 0 is
	// DefaultRefreshMargin.
	Margin time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// NoWarmUp skips the fetch NewTokenCache starts in the background.
	NoWarmUp bool
}

// DefaultRefreshMargin is how long before expiry tokens are refreshed: Google
// and Entra ID issue tokens for an hour (Entra ID up to 24), and a refresh
// five minutes ahead survives a token endpoint that is slow for minutes.
const DefaultRefreshMargin = 5 * time.Minute

// retryAfterFailure is how long after a failed background refresh the next
// is tried while the cached token is still valid.
const retryAfterFailure = 10 * time.Second

// fetchTimeout bounds a fetch made off the request path.
const fetchTimeout = 30 * time.Second

// NewTokenCache returns a TokenCache over fetch, which gets a new token
// from the endpoint (it is called from one goroutine at a time). Unless
// NoWarmUp, it starts fetching the first token at once, so that the first
// request need not wait.
func NewTokenCache(fetch func(context.Context) (Token, error), o TokenCacheOptions) *TokenCache {
	c := &TokenCache{fetch: fetch, margin: o.Margin, now: o.Now, name: o.Channel}
	if c.margin <= 0 {
		c.margin = DefaultRefreshMargin
	}
	if c.now == nil {
		c.now = time.Now
	}
	if !o.NoWarmUp {
		c.start()
	}
	return c
}

// SignsBody is false: a bearer token does not depend on the body.
func (c *TokenCache) SignsBody() bool { return false }

// Authorize sets the bearer token. With a valid token cached it takes no
// lock and allocates nothing.
func (c *TokenCache) Authorize(ctx context.Context, req *http.Request, _ []byte) (time.Duration, error) {
	now := c.now()
	if t := c.cur.Load(); t != nil && (t.expiry.IsZero() || now.Before(t.expiry)) {
		if !c.used.Load() {
			c.used.Store(true)
		}
		if !t.refreshAt.IsZero() && !now.Before(t.refreshAt) {
			c.refresh(now) // due: refresh in the background, serve this one
		}
		req.Header["Authorization"] = t.header
		return 0, nil
	}
	call := c.start()
	c.used.Store(true)
	select {
	case <-call.done:
	case <-ctx.Done():
		return c.now().Sub(now), context.Cause(ctx)
	}
	waited := c.now().Sub(now)
	if call.err != nil {
		return waited, &CredentialError{Channel: c.name, Err: call.err}
	}
	req.Header["Authorization"] = call.tok.header
	return waited, nil
}

// Token returns the cached token, fetching one when none is valid; for
// tests and health checks.
func (c *TokenCache) Token(ctx context.Context) (string, error) {
	req := &http.Request{Header: http.Header{}}
	if _, err := c.Authorize(ctx, req, nil); err != nil {
		return "", err
	}
	return req.Header.Get("Authorization")[len("Bearer "):], nil
}

// LastError returns the error of the latest fetch, nil when it succeeded.
func (c *TokenCache) LastError() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastErr
}

// start begins a fetch unless one is running, and returns the running one.
// The fetch runs on its own goroutine with its own deadline: a request that
// gives up waiting does not cancel a token other requests wait for.
func (c *TokenCache) start() *fetchCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inflight != nil {
		return c.inflight
	}
	call := &fetchCall{done: make(chan struct{})}
	c.inflight = call
	// Uses from now on (the requests waiting for this fetch among them)
	// decide whether the timer refreshes the token it gets.
	c.used.Store(false)
	go c.run(call)
	return call
}

func (c *TokenCache) run(call *fetchCall) {
	ctx, cancel := context.WithTimeout(context.Background(), fetchTimeout)
	t, err := c.fetch(ctx)
	cancel()
	if err == nil && t.Value == "" {
		err = errors.New("the token endpoint returned an empty token")
	}
	var tok *cachedToken
	if err == nil {
		now := c.now()
		tok = &cachedToken{header: []string{"Bearer " + t.Value}, expiry: t.Expiry}
		if !t.Expiry.IsZero() {
			life := t.Expiry.Sub(now)
			tok.refreshAt = t.Expiry.Add(-min(c.margin, life/2))
		}
		c.cur.Store(tok)
	}
	c.mu.Lock()
	call.tok, call.err = tok, err
	c.inflight = nil
	c.lastErr = err
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	switch {
	case tok != nil && !tok.refreshAt.IsZero():
		c.timer = time.AfterFunc(tok.refreshAt.Sub(c.now()), c.refreshIfUsed)
	case err != nil && c.cur.Load() != nil:
		// A refresh failed while the cached token is still valid: try
		// again shortly rather than at every request's sight of it.
		c.retryAt = c.now().Add(retryAfterFailure)
		c.timer = time.AfterFunc(retryAfterFailure, c.refreshIfUsed)
	}
	c.mu.Unlock()
	close(call.done)
}

// refresh starts a background refresh unless one is running or a failed
// one was too recent.
func (c *TokenCache) refresh(now time.Time) {
	c.mu.Lock()
	skip := c.inflight != nil || now.Before(c.retryAt)
	c.mu.Unlock()
	if !skip {
		c.start()
	}
}

// refreshIfUsed is the timer's refresh: only for a channel some request used
// since the last fetch.
func (c *TokenCache) refreshIfUsed() {
	if c.used.Load() {
		c.start()
	}
}
