package relay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/testenv"
)

// aiSDKResult is what testdata/sdk-node/ai-sdk.mjs reports for one stream.
type aiSDKResult struct {
	Text   string     `json:"text"`
	Finish *string    `json:"finish"`
	Usage  *int       `json:"usage"`
	Errors []aiSDKErr `json:"errors"` // error parts the stream reported
	Thrown *aiSDKErr  `json:"thrown"` // what the iteration threw (a broken connection)
	Error  *aiSDKErr  `json:"error"`  // @google/genai: what it threw
}

type aiSDKErr struct {
	Name    *string `json:"name"`
	Status  *int    `json:"status"`
	Message string  `json:"message"`
}

// TestNodeAISDKs: the Vercel AI SDK (ai 6 with @ai-sdk/openai, -anthropic
// and -google 3) and @google/genai stream through the gateway as they do
// from the simulator directly, and when the upstream fails mid-answer
// (model flaky) each reports the upstream's failure as the error the
// gateway's in-band event carries — not a type-validation error (issue 14).
func TestNodeAISDKs(t *testing.T) {
	t.Parallel()
	dir, _ := filepath.Abs("../../testdata/sdk-node")
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.Missing(t, "node", "Node.js 20 or later on PATH")
	}
	for _, pkg := range []string{"ai", "@ai-sdk/openai", "@ai-sdk/anthropic", "@ai-sdk/google", "@google/genai"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg)); err != nil {
			testenv.Missing(t, "the Node SDKs", "run `npm ci --prefix testdata/sdk-node`")
		}
	}
	gw, recs, up, _ := allProtocols(t, nil)
	run := func(base, key string) map[string]aiSDKResult {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, "ai-sdk.mjs", base, key)
		cmd.Dir = dir
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("node ai-sdk.mjs %s: %v\n%s", base, err, stderr.String())
		}
		var m map[string]aiSDKResult
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatalf("script output: %v\n%s", err, out)
		}
		return m
	}
	relayed := run(gw.URL, clientKey)
	direct := run(up.URL, "any")

	str := func(p *string) string {
		if p == nil {
			return "null"
		}
		return *p
	}
	// Healthy streams: what the application sees is the same both ways.
	for _, k := range []string{"chat", "responses", "anthropic", "google", "genai", "genaiV1"} {
		r, d := relayed[k], direct[k]
		rj, _ := json.Marshal(r)
		dj, _ := json.Marshal(d)
		if r.Finish == nil || len(r.Errors) > 0 || r.Thrown != nil || r.Error != nil || !bytes.Equal(rj, dj) {
			t.Errorf("%s through the gateway:\n%s\ndirect:\n%s", k, rj, dj)
		}
	}
	// The upstream resets the connection after 40 tokens. Through the
	// gateway the stream ends with the protocol's error event, which each
	// SDK turns into an error carrying the gateway's message, and then
	// abnormally (SPEC.md §5), which the SDK also raises, as it does on the
	// upstream's own cut directly.
	const upstreamFailure = "upstream stream failed: unexpected EOF"
	for _, k := range []string{"chatFlaky", "responsesFlaky", "anthropicFlaky", "googleFlaky"} {
		r := relayed[k]
		raised := r.Thrown != nil || str(r.Finish) == "error"
		if len(r.Errors) != 1 || !raised || r.Errors[0].Message != upstreamFailure || r.Text == "" {
			rj, _ := json.Marshal(r)
			t.Errorf("%s through the gateway: %s; want one error part %q after the text, and the stream to fail", k, rj, upstreamFailure)
		}
		if d := direct[k]; d.Thrown != nil && (r.Thrown == nil || str(r.Thrown.Name) != str(d.Thrown.Name)) {
			rj, _ := json.Marshal(r)
			dj, _ := json.Marshal(d)
			t.Errorf("%s: through the gateway %s; directly the cut raised %s", k, rj, dj)
		}
		for _, e := range r.Errors {
			if strings.Contains(e.Message, "Type validation") || strings.Contains(str(e.Name), "TypeValidation") {
				t.Errorf("%s: the SDK rejected the gateway's error event: %s", k, e.Message)
			}
		}
	}
	// Gemini's in-band error is 503 UNAVAILABLE, as Google pairs them.
	if e := relayed["googleFlaky"].Errors; len(e) == 1 && (e[0].Status == nil || *e[0].Status != 503) {
		t.Errorf("@ai-sdk/google read status %v, want 503", e[0].Status)
	}
	if e := relayed["genaiFlaky"].Error; e == nil || e.Status == nil || *e.Status != 503 || !strings.Contains(e.Message, "UNAVAILABLE") ||
		!strings.Contains(e.Message, upstreamFailure) || relayed["genaiFlaky"].Text == "" {
		t.Errorf("@google/genai on a failed stream: %+v", relayed["genaiFlaky"])
	}

	// Eleven streams went through the gateway, and each was recorded; the
	// one on the v1 path as a gemini stream that streamed.
	var n int
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		recs.mu.Lock()
		n = len(recs.recs)
		recs.mu.Unlock()
		if n >= 11 || time.Now().After(deadline) {
			break
		}
	}
	if n != 11 {
		t.Errorf("%d records, want 11", n)
	}
	recs.mu.Lock()
	defer recs.mu.Unlock()
	v1 := 0
	for _, r := range recs.recs {
		if r.Route == "POST /v1/models/{target}" {
			v1++
			if r.API != "gemini" || !r.Stream || r.Status != record.StatusOK || r.Model != "fast" {
				t.Errorf("the v1 stream's record: api %s stream %v status %s model %s", r.API, r.Stream, r.Status, r.Model)
			}
		}
	}
	if v1 != 1 {
		t.Errorf("%d records of POST /v1/models/{target}, want 1", v1)
	}
}
