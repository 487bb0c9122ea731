package sim

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/tokens"
)

// TestCountPromptBounded: counting any prompt costs what counting
// maxPromptCounted bytes costs, in memory as in time (issue 50: 2 MiB of
// one letter took 1.35 s and 126 MiB counted whole).
func TestCountPromptBounded(t *testing.T) {
	tokens.Load()
	one := strings.Repeat("a", 4<<20)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	n := countPrompt([]string{one})
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	// What counting the bound itself costs, on this machine now.
	runtime.GC()
	runtime.ReadMemStats(&before)
	startRef := time.Now()
	tokens.Count(one[:maxPromptCounted])
	ref := time.Since(startRef)
	runtime.ReadMemStats(&after)
	refAlloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("4 MiB of one letter: %d tokens estimated in %v, %d KiB allocated (the bound alone: %v, %d KiB)", n, took, alloc>>10, ref, refAlloc>>10)
	if n <= 0 {
		t.Fatalf("count %d", n)
	}
	// 16× the bound's text: counted whole it costs 16× or more.
	if alloc > 3*refAlloc+1<<20 {
		t.Errorf("allocated %d KiB for 4 MiB, want about what %d KiB cost (%d KiB)", alloc>>10, maxPromptCounted>>10, refAlloc>>10)
	}
	if took > 4*ref+50*time.Millisecond {
		t.Errorf("took %v for 4 MiB, want about what %d KiB took (%v)", took, maxPromptCounted>>10, ref)
	}
}

// TestCountPromptExtrapolates: past the bound the count is the counted
// part's tokens per byte times the whole, close to the exact count for
// text of a uniform kind, and exact under the bound.
func TestCountPromptExtrapolates(t *testing.T) {
	prose := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 30000) // about 1.3 MB
	exact := tokens.Count(prose)
	got := countPrompt([]string{"system prompt", prose, "tail"})
	want := exact + tokens.Count("system prompt") + tokens.Count("tail")
	if d := float64(got-want) / float64(want); d > 0.01 || d < -0.01 {
		t.Errorf("estimate %d, exact %d (%.2f%%)", got, want, d*100)
	}
	small := []string{"hello world", "how are you"}
	if got, want := countPrompt(small), tokens.Count(small[0])+tokens.Count(small[1]); got != want {
		t.Errorf("under the bound: %d, want exactly %d", got, want)
	}
}

func BenchmarkCountPrompt(b *testing.B) {
	for _, size := range []int{64 << 10, 2 << 20, 31 << 20} {
		one := strings.Repeat("a", size)
		b.Run(fmt.Sprintf("one-letter-%dKiB", size>>10), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				countPrompt([]string{one})
			}
		})
	}
}

// TestDeclaredBodyPastLimitRefusedUnread: a body declared larger than the
// limit is answered 413 at once, before the simulator waits for (or
// reads) a byte of it.
func TestDeclaredBodyPastLimitRefusedUnread(t *testing.T) {
	srv := testServer(t, Options{MaxBodyBytes: 1 << 20})
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{\"model\":", 1<<30)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a 1 GiB declared body (the simulator waits for it): %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("status %d, want 413", resp.StatusCode)
	}
}
