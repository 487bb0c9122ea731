package relay_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/sim"
	"github.com/ttfx/ttfx/internal/wire"
)

// TestBedrockProfileIDs: a signed bedrock channel serving cross-region
// inference profile ids (us.anthropic.…:0) and an application inference
// profile's ARN, under aliases of its `models` map and under their own
// names. Whatever the client (aws-sdk-go-v2's Converse and InvokeModel
// calls, anthropic-sdk-go's Messages), the upstream path is the one the
// AWS SDK itself sends for that model id (":" and "/" escaped), the
// simulator verifies the SigV4 signature over it, and the record keeps
// the name asked (model) and the id sent (upstream_model).
//
// Not parallel: it sets the AWS environment of the process.
func TestBedrockProfileIDs(t *testing.T) {
	const (
		profileID = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
		arn       = "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/a1b2c3d4e5f6"
	)
	profiles := sim.Builtin()
	profiles[profileID] = profiles["fast"]
	profiles[arn] = profiles["fast"]
	var mu sync.Mutex
	var paths []string // the escaped path and auth scheme of each request the simulator got
	s := sim.New(sim.Options{Profiles: profiles})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, _, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		mu.Lock()
		paths = append(paths, r.URL.EscapedPath()+" "+scheme)
		mu.Unlock()
		s.ServeHTTP(w, r)
	}))
	t.Cleanup(up.Close)
	lastPath := func() string {
		mu.Lock()
		defer mu.Unlock()
		if len(paths) == 0 {
			return ""
		}
		return paths[len(paths)-1]
	}

	// The channel signs with static credentials of a shared config profile.
	dir := t.TempDir()
	conf := "[profile sim]\naws_access_key_id = " + sim.DefaultAWSAccessKeyID + "\naws_secret_access_key = " + sim.DefaultAWSSecretAccessKey + "\n"
	if err := os.WriteFile(filepath.Join(dir, "config"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_BEARER_TOKEN_BEDROCK"} {
		t.Setenv(k, "")
	}
	ch := channel("brk-xr", "bedrock", up.URL, fastTimeouts)
	ch.Key = ""
	ch.Models = []string{"claude-sonnet", "claude-app", "us.anthropic.*", "arn:aws:bedrock:*"}
	ch.Upstream = map[string]string{"claude-sonnet": profileID, "claude-app": arn}
	hooks, err := wire.LookupKind("bedrock").Open(wire.ChannelConfig{Name: ch.Name, Base: ch.BaseURL, Region: "us-east-1", Settings: map[string]string{"profile": "sim"}})
	if err != nil {
		t.Fatal(err)
	}
	ch.Hooks = hooks
	gw, recs := gatewayTLS(t, ch)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	via := bedrockSDK(gw, clientKey)
	direct := bedrockruntime.New(bedrockruntime.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(up.URL), RetryMaxAttempts: 1,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: sim.DefaultAWSAccessKeyID, SecretAccessKey: sim.DefaultAWSSecretAccessKey}, nil
		}),
	})

	// sdkPath is the path the AWS SDK sends for id, signed, to the
	// simulator directly.
	sdkPath := func(id, method string) string {
		t.Helper()
		var err error
		switch method {
		case "converse-stream":
			_, _, _, _, err = converseText(ctx, direct, id)
		case "invoke-with-response-stream":
			_, err = invokeStream(ctx, direct, id)
		}
		if err != nil {
			t.Fatalf("%s %s directly: %v", method, id, err)
		}
		return lastPath()
	}
	check := func(name, asked, upstream, api, want string) {
		t.Helper()
		if got := lastPath(); got != want {
			t.Errorf("%s: the simulator got %q, want %q (the AWS SDK's own)", name, got, want)
		}
		rec := recs.lastOfAPI(t, asked, api)
		if rec.Status != record.StatusOK || rec.UpstreamModel != upstream || rec.Channel != ch.Name {
			t.Errorf("%s record: status %s (%s) model %q upstream_model %q channel %s", name, rec.Status, rec.Error, rec.Model, rec.UpstreamModel, rec.Channel)
		}
	}
	for _, tc := range []struct{ asked, upstream string }{
		{"claude-sonnet", profileID}, // an alias of a profile id
		{profileID, profileID},       // the profile id itself (a glob of models)
		{"claude-app", arn},          // an alias of an ARN
		{arn, arn},                   // the ARN itself, "/" and ":" escaped in the client's path
	} {
		want := sdkPath(tc.upstream, "converse-stream")
		if !strings.HasSuffix(want, " AWS4-HMAC-SHA256") || strings.ContainsAny(strings.TrimPrefix(want, "/model/"), ":") {
			t.Fatalf("the SDK's own request: %q", want)
		}
		if text, _, _, _, err := converseText(ctx, via, tc.asked); err != nil || text == "" {
			t.Errorf("ConverseStream %s through the gateway: %q %v", tc.asked, text, err)
		}
		check("ConverseStream "+tc.asked, tc.asked, tc.upstream, "bedrock.converse", want)

		want = sdkPath(tc.upstream, "invoke-with-response-stream")
		if a, err := invokeStream(ctx, via, tc.asked); err != nil || a.text == "" {
			t.Errorf("InvokeModelWithResponseStream %s through the gateway: %+v %v", tc.asked, a, err)
		}
		check("InvokeModelWithResponseStream "+tc.asked, tc.asked, tc.upstream, "bedrock.invoke", want)

		// An Anthropic client's request, for the same model, takes the
		// same path upstream.
		ac := anthropic.NewClient(aoption.WithBaseURL(gw.URL), aoption.WithAPIKey(clientKey), aoption.WithMaxRetries(0), aoption.WithHTTPClient(gw.Client()))
		st := ac.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: anthropic.Model(tc.asked), MaxTokens: 256,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello."))}})
		n := 0
		for st.Next() {
			n++
		}
		if err := st.Err(); err != nil || n == 0 {
			t.Errorf("anthropic %s through the gateway: %d events, %v", tc.asked, n, err)
		}
		st.Close()
		check("anthropic "+tc.asked, tc.asked, tc.upstream, "anthropic", want)
	}
	// A model id the channel does not serve is refused at the gateway,
	// in Bedrock's shape.
	if _, _, _, _, err := converseText(ctx, via, "eu.anthropic.claude-sonnet-4-5-20250929-v1:0"); err == nil || !strings.Contains(err.Error(), "404") && !strings.Contains(err.Error(), "ResourceNotFound") {
		t.Errorf("a model no channel serves: %v", err)
	}
	t.Logf("upstream paths: %q", paths)
}
