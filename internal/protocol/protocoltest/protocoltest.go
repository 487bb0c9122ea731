// Package protocoltest holds what the tests of the classifier units share:
// the invariants every classified event must keep (CheckEvent, the body of
// each unit's fuzz target), seeding from the recorded fixtures, and the
// hot-path measurements each unit runs on its own typical event
// (ParseClassify, Classify, AllocsPerEvent). It names no API: a unit passes
// its own.
package protocoltest

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/ttfx/ttfx/internal/protocol"
	"github.com/ttfx/ttfx/internal/sse"
)

// SeedEvents adds to f, as (type, data), the events under 4 KiB of every
// recorded fixture in dir (*.sse) that protocol.Detect takes for api.
func SeedEvents(f *testing.F, api protocol.API, dir string) {
	files, _ := filepath.Glob(filepath.Join(dir, "*.sse"))
	if len(files) == 0 {
		f.Fatalf("no fixtures in %s", dir)
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		if got, _ := protocol.Detect(b); got != api {
			continue
		}
		r := sse.NewReader(bytes.NewReader(b), 0)
		for {
			p, err := r.Next()
			if err != nil {
				break
			}
			if p.Kind == sse.PieceEvent && len(p.Event.Data) < 4096 {
				f.Add(string(p.Event.Type), bytes.Clone(p.Event.Data))
			}
		}
	}
}

// CheckEvent classifies one event of api and checks what must hold for any
// input: one kind set at least, a Result consistent with its kinds, nothing
// of invalid JSON counted, the event counted once, and no panic in the
// stream's summaries or in DetectData.
func CheckEvent(t testing.TB, api protocol.API, typ string, data []byte) {
	t.Helper()
	s := protocol.NewStream(api)
	r := s.Event(&sse.Event{Type: []byte(typ), Data: data})
	if r.Kinds == 0 {
		t.Fatalf("event %q classified as nothing", data)
	}
	content := protocol.Text | protocol.Reasoning | protocol.Tool
	if r.Effective != (r.Kinds&content != 0) || r.Visible != (r.Kinds&protocol.Text != 0) || r.Terminal != (r.Kinds&(protocol.Done|protocol.Error) != 0) {
		t.Fatalf("inconsistent result %+v", r)
	}
	trimmed := protocol.TrimSpace(data)
	if r.Event != (len(trimmed) > 0) {
		t.Fatalf("Event = %v for data %q", r.Event, data)
	}
	if r.Event && !json.Valid(trimmed) && string(trimmed) != "[DONE]" && r.Kinds != protocol.Unknown {
		t.Fatalf("invalid JSON %q classified as %s", data, r.Kinds)
	}
	if r.Kinds&protocol.Unknown != 0 && (r.Effective || r.Terminal) {
		t.Fatalf("unknown event with content: %+v", r)
	}
	if r.Visible && s.VisibleText() == "" {
		t.Fatalf("visible event left no visible text")
	}
	c := s.Counts()
	if total := c.Heartbeat + c.Metadata + c.Reasoning + c.Tool + c.Text + c.Done + c.Error + c.Unknown; total != 1 {
		t.Fatalf("one event counted %d times: %+v", total, c)
	}
	s.Tokens()
	s.Terminal()
	protocol.DetectData([]byte(typ), data)
}

// loopReader returns the same bytes over and over, so a benchmark reads an
// endless stream of one event with no per-iteration setup.
type loopReader struct {
	data []byte
	off  int
}

func (l *loopReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], l.data[l.off:])
		n += c
		l.off = (l.off + c) % len(l.data)
	}
	return n, nil
}

// ParseClassify measures SSE parsing plus classification of event (one
// whole event as sent, "data: …\n\n"), which must be visible text: the
// per-event cost the relay and the benchmark client pay. The visible-text
// buffer fills up to its bound and then stays, as in a long stream.
func ParseClassify(b *testing.B, api protocol.API, event string) {
	r := sse.NewReader(&loopReader{data: []byte(event)}, 0)
	s := protocol.NewStream(api)
	b.SetBytes(int64(len(event)))
	b.ReportAllocs()
	for b.Loop() {
		p, err := r.Next()
		if err != nil {
			b.Fatal(err)
		}
		if res := s.Piece(p); !res.Visible {
			b.Fatalf("not classified as text: %+v", res)
		}
	}
}

// Classify measures classification alone, of an already parsed event.
func Classify(b *testing.B, api protocol.API, event string) {
	r := sse.NewReader(&loopReader{data: []byte(event)}, 0)
	p, err := r.Next()
	if err != nil {
		b.Fatal(err)
	}
	ev := p.Event
	s := protocol.NewStream(api)
	b.ReportAllocs()
	for b.Loop() {
		s.Event(&ev)
	}
}

// AllocsPerEvent returns the allocations of parsing and classifying event
// once more in a long stream of it (the issue 2 target is at most one: the
// visible-text buffer grows now and then, nothing else allocates).
func AllocsPerEvent(t testing.TB, api protocol.API, event string) float64 {
	r := sse.NewReader(&loopReader{data: []byte(event)}, 0)
	s := protocol.NewStream(api)
	return testing.AllocsPerRun(2000, func() {
		p, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		s.Piece(p)
	})
}
