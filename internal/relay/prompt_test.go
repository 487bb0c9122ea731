package relay_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// promptBody yields a chat request whose prompt is n bytes, without holding
// them: what the test measures is what the gateway keeps, not the client.
type promptBody struct {
	head, tail string
	n, off     int
}

func (b *promptBody) size() int { return len(b.head) + b.n + len(b.tail) }

func (b *promptBody) Read(p []byte) (int, error) {
	w := 0
	for w < len(p) && b.off < b.size() {
		switch {
		case b.off < len(b.head):
			c := copy(p[w:], b.head[b.off:])
			w, b.off = w+c, b.off+c
		case b.off < len(b.head)+b.n:
			c := min(len(p)-w, len(b.head)+b.n-b.off)
			for i := range c {
				p[w+i] = 'a' + byte((b.off+i)%26)
			}
			w, b.off = w+c, b.off+c
		default:
			c := copy(p[w:], b.tail[b.off-len(b.head)-b.n:])
			w, b.off = w+c, b.off+c
		}
	}
	if w == 0 {
		return 0, io.EOF
	}
	return w, nil
}

// TestPromptReleasedOnceCommitted: a stream that has begun does not keep
// its prompt. Streams with prompts of half a megabyte are held open after
// their first event; the gateway's live heap grows by far less than the
// prompts (before, it kept each twice: as sent and with the usage option).
func TestPromptReleasedOnceCommitted(t *testing.T) {
	const streams, promptBytes = 16, 512 << 10
	hold := make(chan struct{})
	var got sync.Map
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		got.Store(r, n)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte(`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"hi"},"finish_reason":null}]}` + "\n\n"))
		http.NewResponseController(w).Flush()
		select {
		case <-hold:
		case <-r.Context().Done():
			return
		}
		w.Write([]byte(`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}` + "\n\ndata: [DONE]\n\n"))
	}))
	defer up.Close()
	gw, _ := gateway(t, channel("c", "openai", up.URL, fastTimeouts))

	live := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := live()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ready := make(chan error, streams)
	var wg sync.WaitGroup
	for range streams {
		wg.Go(func() {
			body := &promptBody{head: `{"model":"m","stream":true,"messages":[{"role":"user","content":"`, tail: `"}]}`, n: promptBytes}
			req, _ := http.NewRequestWithContext(ctx, "POST", gw.URL+"/v1/chat/completions", body)
			req.ContentLength = int64(body.size())
			req.Header.Set("Authorization", "Bearer "+clientKey)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				ready <- err
				return
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			line, err := br.ReadString('\n')
			if err != nil || !strings.HasPrefix(line, "data: ") {
				ready <- fmt.Errorf("first line %q: %v", line, err)
				return
			}
			ready <- nil
			io.Copy(io.Discard, br)
		})
	}
	for range streams {
		if err := <-ready; err != nil {
			t.Fatal(err)
		}
	}
	grown := int64(live()) - int64(before)
	close(hold)
	wg.Wait()

	n := 0
	got.Range(func(_, v any) bool {
		if v.(int64) < promptBytes {
			t.Errorf("the upstream got a body of %d bytes, want the whole prompt", v)
		}
		n++
		return true
	})
	if n != streams {
		t.Errorf("the upstream got %d requests, want %d", n, streams)
	}
	t.Logf("%d streams open with prompts of %d KiB: live heap grew by %.1f KiB a stream", streams, promptBytes>>10, float64(grown)/streams/1024)
	if limit := int64(streams * promptBytes / 4); grown > limit {
		t.Errorf("with %d streams open the live heap grew by %d bytes, more than a quarter of their prompts (%d): the prompts are kept", streams, grown, limit)
	}
}
