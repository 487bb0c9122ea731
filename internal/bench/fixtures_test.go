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
	"slices"
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

// replay serves a recorded stream over loopback in stages: the pieces
// before a milestone piece go out at once, and each milestone piece (and
// the end of the stream) waits gap more than the stage before it
// (absolute times from the first byte, so lateness does not add up).
// Piece j goes out at stage(j)·gap.
func replay(t testing.TB, data []byte, milestones []int, gap time.Duration) *httptest.Server {
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
				break
			}
			time.Sleep(time.Until(start.Add(time.Duration(stage(milestones, j)) * gap)))
			w.Write(p.Raw)
			rc.Flush()
		}
		time.Sleep(time.Until(start.Add(time.Duration(len(milestones)+1) * gap)))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// stage is the number of milestone pieces at or before piece j.
func stage(milestones []int, j int) int {
	n := 0
	for _, m := range milestones {
		if m <= j {
			n++
		}
	}
	return n
}

// unterminated reports whether piece j is the stream's last and has no
// blank line after it: it is dispatched only when the stream ends (some
// SDK fixtures are stored that way), so its mark falls at the end.
func unterminated(data []byte, j int) bool {
	rd := sse.NewReader(bytes.NewReader(data), 0)
	var last []byte
	n := 0
	for {
		p, err := rd.Next()
		if err != nil {
			break
		}
		last = append(last[:0], p.Raw...)
		n++
	}
	if j != n-1 {
		return false
	}
	return !bytes.HasSuffix(last, []byte("\n\n")) && !bytes.HasSuffix(last, []byte("\r\n\r\n")) && !bytes.HasSuffix(last, []byte("\r\r"))
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
// loopback, holding back each milestone piece the fixtures' index names
// by 100 ms, and checks that each mark falls when its piece arrived: the
// bench classifies with the gateway's classifier, and marks a piece when
// it arrives, not at the end of the stream or of a read.
func TestFixtures(t *testing.T) {
	const gap = 100 * time.Millisecond
	for _, fx := range loadFixtures(t) {
		t.Run(fx.file, func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(filepath.Join(fixtureDir, fx.file))
			if err != nil {
				t.Fatal(err)
			}
			var milestones []int
			for _, ev := range []int{fx.firstEvent, fx.firstResp, fx.firstTx} {
				if p := pieceOf(data, ev); ev >= 0 && !slices.Contains(milestones, p) {
					milestones = append(milestones, p)
				}
			}
			srv := replay(t, data, milestones, gap)
			base, _ := url.Parse(srv.URL)
			c := &Client{HTTP: srv.Client(), Wire: &Wire{API: fx.api, Base: base, Model: "m", Stream: true, MaxTokens: 16}, Timeout: 30 * time.Second}
			r := c.Do(t.Context(), []byte(`{}`))
			wantStatus := map[string]string{"done": StatusOK, "truncated": StatusTruncated, "error": StatusResponseError}[fx.terminal]
			if r.Status != wantStatus || r.Terminal != fx.terminal {
				t.Fatalf("status %s terminal %s (%s), want %s %s", r.Status, r.Terminal, r.Error, wantStatus, fx.terminal)
			}
			first := stage(milestones, pieceOf(data, fx.firstEvent))
			event, _ := r.FirstSSEEventMs.Ms()
			for _, m := range []struct {
				name  string
				index int
				mark  interface{ Ms() (float64, bool) }
			}{
				{"first response", fx.firstResp, r.FirstResponseMs},
				{"first text", fx.firstTx, r.FirstTextDeltaMs},
				{"end", -2, r.EndToEndMs},
			} {
				v, ok := m.mark.Ms()
				if ok != (m.index != -1) {
					t.Errorf("%s present=%v, index says %d", m.name, ok, m.index)
					continue
				}
				if !ok {
					continue
				}
				st := len(milestones) + 1 // the end
				if m.index >= 0 && !unterminated(data, pieceOf(data, m.index)) {
					st = stage(milestones, pieceOf(data, m.index))
				}
				// The mark trails the first event by the stages in
				// between. The first event's own mark may be late (race
				// detector, loaded machine: 15 ms seen), which shortens
				// the difference; a quarter of a stage below and half a
				// stage above still tell each stage from the next.
				want := float64(st-first) * float64(gap) / float64(time.Millisecond)
				if got := v - event; got < want-float64(gap/time.Millisecond)/4 || got > want+float64(gap/time.Millisecond)/2 {
					t.Errorf("%s %.1f ms after the first event, want %.0f (stage %d of %d)", m.name, got, want, st, len(milestones)+1)
				}
			}
			if fx.firstTx < 0 && r.VisibleOutputTPS.Valid() {
				t.Error("speed without visible text")
			}
		})
	}
}
