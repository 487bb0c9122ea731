package relay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/testenv"
)

// TestNodeSDKs: the official openai and @anthropic-ai/sdk npm packages
// stream through the gateway unchanged (SPEC.md §11). The script prints what
// the SDKs saw; through the gateway it must equal what they see directly.
func TestNodeSDKs(t *testing.T) {
	t.Parallel()
	dir, _ := filepath.Abs("../../testdata/sdk-node")
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.Missing(t, "node", "Node.js 20 or later on PATH")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai")); err != nil {
		testenv.Missing(t, "the Node SDKs", "run `npm ci --prefix testdata/sdk-node`")
	}
	gw, recs, up, _ := allProtocols(t, nil)
	run := func(base, key string) map[string]json.RawMessage {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, "stream.mjs", base, key)
		cmd.Dir = dir
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("node stream.mjs %s: %v\n%s", base, err, stderr.String())
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatalf("script output: %v\n%s", err, out)
		}
		return m
	}
	relayed := run(gw.URL, clientKey)
	direct := run(up.URL, "any")
	for _, k := range []string{"chat", "responses", "anthropic"} {
		if len(relayed[k]) < 20 || !bytes.Equal(relayed[k], direct[k]) {
			t.Errorf("%s through the gateway:\n%s\ndirect:\n%s", k, relayed[k], direct[k])
		}
	}
	if string(relayed["wrongKey"]) != "401" {
		t.Errorf("a wrong key through the gateway: %s, want the SDK's 401 error", relayed["wrongKey"])
	}
	// The gateway records a request just after its last byte went out.
	var n int
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		recs.mu.Lock()
		n = len(recs.recs)
		recs.mu.Unlock()
		if n >= 4 || time.Now().After(deadline) {
			break
		}
	}
	if n != 4 {
		t.Errorf("%d records, want 4 (chat, responses, messages, the refused one)", n)
	}
}
