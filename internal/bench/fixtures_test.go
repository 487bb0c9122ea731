package bench

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/protocol"
	"github.com/ttfx/ttfx/internal/sse"
)

const fixtureDir = "../../testdata/fixtures"

// fixture is a row of the fixtures' INDEX.md: the dispatched-event index
// of each milestone (-1 for "—") and the terminal state.
type fixture struct {
	file                           string
	api                            protocol.API
	firstEvent, firstResp, firstTx int
	terminal                       string
}

func loadFixtures(t testing.TB) []fixture {
	t.Helper()
	f, err := os.Open(filepath.Join(fixtureDir, "INDEX.md"))
	if err != nil {
		t.Fatalf("fixtures index: %v", err)
	}
	defer f.Close()
	idx := func(s string) int {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return -1
		}
		return n
	}
	var out []fixture
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		cells := strings.Split(sc.Text(), "|")
		if len(cells) < 8 || !strings.Contains(cells[1], ".sse") {
			continue
		}
		api, err := protocol.ParseAPI(strings.TrimSpace(cells[2]))
		if err != nil {
			t.Fatalf("index api %q: %v", cells[2], err)
		}
		out = append(out, fixture{
			file: strings.Trim(strings.TrimSpace(cells[1]), "`"), api: api,
			firstEvent: idx(cells[3]), firstResp: idx(cells[4]), firstTx: idx(cells[5]),
			terminal: strings.TrimSpace(cells[6]),
		})
	}
	if len(out) < 10 {
		t.Fatalf("only %d fixtures in the index", len(out))
	}
	return out
}

// replay serves a recorded stream over loopback with piece j written and
// flushed at start + j·gap (absolute times, so lateness does not add up).
func replay(t testing.TB, data []byte, gap time.Duration) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		rc.Flush()
		start := time.Now()
		rd := sse.NewReader(bytes.NewReader(data), 0)
		for j := 0; ; j++ {
			p, err := rd.Next()
			if err != nil {
				return
			}
			time.Sleep(time.Until(start.Add(time.Duration(j) * gap)))
			w.Write(p.Raw)
			rc.Flush()
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// pieceOf maps a dispatched-event index to the index of the piece that
// carries it (comments and blank runs are pieces too).
func pieceOf(data []byte, event int) int {
	rd := sse.NewReader(bytes.NewReader(data), 0)
	ev := 0
	for j := 0; ; j++ {
		p, err := rd.Next()
		if err != nil {
			return -1
		}
		if p.Kind == sse.PieceEvent && len(bytes.TrimSpace(p.Event.Data)) > 0 {
			if ev == event {
				return j
			}
			ev++
		}
	}
}

// TestFixtures replays every recorded provider stream to the bench over
// loopback, one piece every few milliseconds, and checks that the marks
// fall at the pieces the fixtures' index names: the bench classifies with
// the gateway's classifier and marks a piece when it arrives, not later.
func TestFixtures(t *testing.T) {
	const gap = 4 * time.Millisecond
	for _, fx := range loadFixtures(t) {
		t.Run(fx.file, func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(filepath.Join(fixtureDir, fx.file))
			if err != nil {
				t.Fatal(err)
			}
			srv := replay(t, data, gap)
			base, _ := url.Parse(srv.URL)
			c := &Client{HTTP: srv.Client(), Wire: &Wire{API: fx.api, Base: base, Model: "m", Stream: true, MaxTokens: 16}, Timeout: 30 * time.Second}
			r := c.Do(t.Context(), []byte(`{}`))
			wantStatus := map[string]string{"done": StatusOK, "truncated": StatusTruncated, "error": StatusResponseError}[fx.terminal]
			if r.Status != wantStatus || r.Terminal != fx.terminal {
				t.Fatalf("status %s terminal %s (%s), want %s %s", r.Status, r.Terminal, r.Error, wantStatus, fx.terminal)
			}
			event, _ := r.FirstSSEEventMs.Ms()
			for _, m := range []struct {
				name  string
				index int
				mark  interface{ Ms() (float64, bool) }
			}{
				{"first response", fx.firstResp, r.FirstResponseMs},
				{"first text", fx.firstTx, r.FirstTextDeltaMs},
			} {
				v, ok := m.mark.Ms()
				if ok != (m.index >= 0) {
					t.Errorf("%s present=%v, index says %d", m.name, ok, m.index)
					continue
				}
				if !ok {
					continue
				}
				// Pieces go out gap apart from the first: the mark must
				// trail the first event by the pieces in between.
				want := float64(pieceOf(data, m.index)-pieceOf(data, fx.firstEvent)) * float64(gap) / float64(time.Millisecond)
				if got := v - event; got < want-1 || got > want+40 {
					t.Errorf("%s %.1f ms after the first event, want %.1f (+40 for a loaded machine)", m.name, got, want)
				}
			}
			if fx.firstTx < 0 && r.VisibleOutputTPS.Valid() {
				t.Error("speed without visible text")
			}
		})
	}
}
