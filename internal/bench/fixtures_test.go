package bench

import (
	"bufio"
	"bytes"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/protocol"
	"github.com/ttfx/ttfx/internal/sse"
	"github.com/ttfx/ttfx/internal/testenv"
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
//
// Each stage starts gap after the previous one was sent (not on a fixed
// schedule, which a late stage would squeeze against the next), and sent
// keeps when each piece went out, and when the body ended (key -1), for
// the test to measure the client's marks against.
func replay(t testing.TB, data []byte, milestones []int, gap time.Duration) (*httptest.Server, *sendTimes) {
	t.Helper()
	sent := &sendTimes{at: map[int]time.Time{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		rc.Flush()
		last, st := time.Now(), 0
		rd := sse.NewReader(bytes.NewReader(data), 0)
		for j := 0; ; j++ {
			p, err := rd.Next()
			if err != nil {
				break
			}
			if s := stage(milestones, j); s > st {
				time.Sleep(time.Duration(s-st) * gap)
				st = s
			}
			w.Write(p.Raw)
			rc.Flush()
			last = time.Now()
			sent.set(j, last)
		}
		time.Sleep(time.Duration(len(milestones)+1-st) * gap)
		sent.set(-1, time.Now())
	}))
	t.Cleanup(srv.Close)
	return srv, sent
}

// sendTimes is when replay sent each piece.
type sendTimes struct {
	mu sync.Mutex // guards at
	at map[int]time.Time
}

func (s *sendTimes) set(j int, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.at[j] = at
}

func (s *sendTimes) get(j int) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.at[j]
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
			srv, sent := replay(t, data, milestones, gap)
			base, _ := url.Parse(srv.URL)
			c := &Client{HTTP: srv.Client(), Wire: &Wire{API: fx.api, Base: base, Model: "m", Stream: true, MaxTokens: 16}, Timeout: 30 * time.Second}
			r := c.Do(t.Context(), []byte(`{}`))
			wantStatus := map[string]string{"done": StatusOK, "truncated": StatusTruncated, "error": StatusResponseError}[fx.terminal]
			if r.Status != wantStatus || r.Terminal != fx.terminal {
				t.Fatalf("status %s terminal %s (%s), want %s %s", r.Status, r.Terminal, r.Error, wantStatus, fx.terminal)
			}
			firstSent := sent.get(pieceOf(data, fx.firstEvent))
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
				piece := -1 // the end
				if m.index >= 0 && !unterminated(data, pieceOf(data, m.index)) {
					piece = pieceOf(data, m.index)
				}
				// The mark trails the first event's as the piece's send
				// trails the first event's, at the server: stages are a
				// gap apart there, so a quarter of one tells a mark from
				// the next stage's. Each read can wait its turn on a
				// loaded machine, the first event's too: both ways, what
				// this process's timers were seen to slip meanwhile.
				want := float64(sent.get(piece).Sub(firstSent)) / float64(time.Millisecond)
				slip := testenv.Slip(time.Duration(v*float64(time.Millisecond)) + time.Second)
				tol := float64(gap/4+2*slip) / float64(time.Millisecond)
				if got := v - event; math.Abs(got-want) > tol {
					t.Errorf("%s %.1f ms after the first event, want %.1f ± %.1f as sent (timers ran up to %v late meanwhile)", m.name, got, want, tol, slip.Round(time.Millisecond))
				}
			}
			if fx.firstTx < 0 && r.VisibleOutputTPS.Valid() {
				t.Error("speed without visible text")
			}
		})
	}
}
