package bedrock

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	_ "github.com/ttfx/ttfx/internal/provider/bedrock/bedrocksim" // the simulator's Bedrock side
	"github.com/ttfx/ttfx/internal/sim"
)

// A request SigV4 signs verifies at the simulator, which checks
// signatures as AWS does, also for a model id with ':' (escaped in the
// path, escaped again in the canonical request); the wrong secret does not.
func TestSigV4AgainstSimulator(t *testing.T) {
	srv := httptest.NewServer(sim.New(sim.Options{Profiles: sim.Builtin()}))
	t.Cleanup(srv.Close)
	base, _ := url.Parse(srv.URL)
	send := func(s *SigV4, model string) int {
		body := []byte(`{"messages":[{"role":"user","content":[{"text":"Say hello."}]}]}`)
		// The model id escaped as the AWS SDKs escape a path segment.
		u := *base
		u.Path = "/model/" + model + "/converse"
		u.RawPath = "/model/" + strings.ReplaceAll(model, ":", "%3A") + "/converse"
		req, _ := http.NewRequest("POST", u.String(), bytes.NewReader(body))
		req.URL = &u
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Request-Id", "req_1")
		if _, err := s.Authorize(context.Background(), req, body); err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Logf("%s: %d %s %s", model, resp.StatusCode, resp.Header.Get("X-Amzn-Errortype"), b)
		}
		return resp.StatusCode
	}
	static := func(secret string) aws.CredentialsProvider {
		return aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: sim.DefaultAWSAccessKeyID, SecretAccessKey: secret}, nil
		})
	}
	good := NewSigV4(static(sim.DefaultAWSSecretAccessKey), "us-east-1", "brk", nil)
	if code := send(good, "fast"); code != 200 {
		t.Errorf("signed: %d", code)
	}
	if code := send(good, "anthropic.claude-3-5-haiku-20241022-v1:0"); code != 404 && code != 200 {
		// The simulator knows no such profile (404) but the signature
		// verified: a bad one is a 403 before that.
		t.Errorf("a model id with ':': %d", code)
	}
	if code := send(NewSigV4(static("wrong"), "us-east-1", "brk", nil), "fast"); code != 403 {
		t.Errorf("the wrong secret: %d, want 403", code)
	}
}

// Credentials that expire are refreshed before they do, off the request
// path: after the warm-up fetch no request waits, and a fetch on a path
// happens only when no valid credentials are held.
func TestSigV4Refresh(t *testing.T) {
	var fetches atomic.Int32
	var now atomic.Int64
	now.Store(time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC).UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	release := make(chan struct{})
	p := aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		n := fetches.Add(1)
		if n == 1 {
			<-release // the warm-up fetch is slow
		}
		return aws.Credentials{AccessKeyID: "AKIA", SecretAccessKey: "s", SessionToken: "t",
			CanExpire: true, Expires: clock().Add(time.Hour)}, nil
	})
	s := NewSigV4(p, "us-east-1", "brk", clock)
	req := func() time.Duration {
		r, _ := http.NewRequest("POST", "https://bedrock-runtime.us-east-1.amazonaws.com/model/m/converse", nil)
		w, err := s.Authorize(context.Background(), r, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.Header.Get("Authorization") == "" || r.Header.Get("X-Amz-Security-Token") != "t" {
			t.Fatalf("not signed: %v", r.Header)
		}
		return w
	}
	// The first request came before the warm-up fetch ended: it waited.
	go func() {
		time.Sleep(20 * time.Millisecond)
		now.Add(int64(50 * time.Millisecond))
		close(release)
	}()
	if w := req(); w <= 0 {
		t.Errorf("first request waited %v, want > 0", w)
	}
	if w := req(); w != 0 {
		t.Errorf("second request waited %v", w)
	}
	// Past the refresh point (5 minutes before expiry) a request is signed
	// with the held credentials at once and a refresh starts.
	now.Add(int64(56 * time.Minute))
	if w := req(); w != 0 {
		t.Errorf("a request at the refresh point waited %v", w)
	}
	deadline := time.Now().Add(5 * time.Second)
	for fetches.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if fetches.Load() != 2 {
		t.Errorf("%d fetches, want 2 (warm-up and one refresh)", fetches.Load())
	}
}
