package bedrock

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/ttfx/ttfx/internal/wire"
)

// SigV4 signs upstream requests with AWS Signature Version 4, with
// credentials from an aws.CredentialsProvider (the SDK's default chain:
// environment, shared config and profiles, web identity, container and
// instance roles). Temporary credentials are refreshed off the request
// path: a fetch starts when the signer is made, again Margin before the
// credentials expire (by a timer, as long as requests use them), and a
// request waits for one only when none valid is held — that wait is what
// Authorize reports (upstream_auth_ms). Safe for concurrent use.
type SigV4 struct {
	provider aws.CredentialsProvider
	signer   *v4.Signer
	region   string
	channel  string
	margin   time.Duration
	now      func() time.Time

	cur  atomic.Pointer[aws.Credentials]
	used atomic.Bool // a request signed since the last fetch

	mu       sync.Mutex // guards inflight, timer, lastErr
	inflight chan struct{}
	lastErr  error
	timer    *time.Timer
}

// signingName is Bedrock's SigV4 service name (its runtime endpoint's too).
const signingName = "bedrock"

// credentialMargin is how long before expiry credentials are refreshed:
// role credentials live an hour at least (15 minutes for some session
// tokens); five minutes ahead survives an endpoint slow for minutes.
const credentialMargin = 5 * time.Minute

// NewSigV4 returns a signer for region over provider and starts fetching
// the first credentials in the background.
func NewSigV4(provider aws.CredentialsProvider, region, channel string, now func() time.Time) *SigV4 {
	if now == nil {
		now = time.Now
	}
	s := &SigV4{provider: provider, signer: v4.NewSigner(), region: region, channel: channel, margin: credentialMargin, now: now}
	s.start()
	return s
}

// SignsBody is true: the signature covers the body's hash.
func (s *SigV4) SignsBody() bool { return true }

// Authorize signs req, whose final body is body. waited is how long it
// waited for credentials fetched on this request's path.
func (s *SigV4) Authorize(ctx context.Context, req *http.Request, body []byte) (time.Duration, error) {
	start := s.now()
	c := s.cur.Load()
	var waited time.Duration
	if !s.valid(c, start) {
		done := s.start()
		select {
		case <-done:
		case <-ctx.Done():
			return s.now().Sub(start), context.Cause(ctx)
		}
		waited = s.now().Sub(start)
		if c = s.cur.Load(); !s.valid(c, s.now()) {
			s.mu.Lock()
			err := s.lastErr
			s.mu.Unlock()
			if err == nil {
				err = fmt.Errorf("no valid credentials")
			}
			return waited, &wire.CredentialError{Channel: s.channel, Err: fmt.Errorf("AWS credentials: %w", err)}
		}
	} else if c.CanExpire && !start.Before(c.Expires.Add(-s.margin)) {
		s.start() // due: refresh in the background, sign with these
	}
	if !s.used.Load() {
		s.used.Store(true)
	}
	h := sha256.Sum256(body)
	hash := hex.EncodeToString(h[:])
	req.Header.Set("X-Amz-Content-Sha256", hash)
	if err := s.signer.SignHTTP(ctx, *c, req, hash, signingName, s.region, start); err != nil {
		return waited, fmt.Errorf("channel %s: sign the request: %w", s.channel, err)
	}
	return waited, nil
}

// valid reports whether c is held and not expired at now (on the signer's
// clock, not aws.Credentials.Expired's).
func (s *SigV4) valid(c *aws.Credentials, now time.Time) bool {
	return c != nil && (!c.CanExpire || now.Before(c.Expires))
}

// start begins a fetch unless one runs, and returns its done channel.
func (s *SigV4) start() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inflight != nil {
		return s.inflight
	}
	done := make(chan struct{})
	s.inflight = done
	s.used.Store(false)
	go s.fetch(done)
	return done
}

// fetch gets credentials on its own deadline (a request that stops
// waiting does not cancel what others wait for) and arms the refresh.
func (s *SigV4) fetch(done chan struct{}) {
	if inv, ok := s.provider.(interface{ Invalidate() }); ok && s.cur.Load() != nil {
		// The SDK's own cache (aws.CredentialsCache, which
		// config.LoadDefaultConfig puts round every chain) would hand
		// back the credentials held until they expire: a refresh ahead
		// of expiry has to get past it.
		inv.Invalidate()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	c, err := s.provider.Retrieve(ctx)
	cancel()
	if err == nil && !c.HasKeys() {
		err = fmt.Errorf("the credential chain returned no keys")
	}
	if err == nil {
		s.cur.Store(&c)
	}
	s.mu.Lock()
	s.inflight, s.lastErr = nil, err
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	if err == nil && c.CanExpire {
		life := c.Expires.Sub(s.now())
		s.timer = time.AfterFunc(max(life-min(s.margin, life/2), time.Second), s.refreshIfUsed)
	} else if err != nil && s.cur.Load() != nil {
		s.timer = time.AfterFunc(10*time.Second, s.refreshIfUsed)
	}
	s.mu.Unlock()
	close(done)
}

// refreshIfUsed refreshes credentials some request used since the last
// fetch; a channel no request uses stops refreshing.
func (s *SigV4) refreshIfUsed() {
	if s.used.Load() {
		s.start()
	}
}

// LastError is the error of the latest fetch, nil when it succeeded.
func (s *SigV4) LastError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastErr
}
