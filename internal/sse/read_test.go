package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// ev is a comparable view of a dispatched event.
type ev struct {
	Type, Data, ID string
}

func (e ev) String() string { return fmt.Sprintf("{%q %q %q}", e.Type, e.Data, e.ID) }

// chunkReader returns its input in reads of the given sizes (the last size
// repeats), so tests can split a stream at any offset.
type chunkReader struct {
	data  []byte
	sizes []int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := c.sizes[0]
	if len(c.sizes) > 1 {
		c.sizes = c.sizes[1:]
	}
	if n <= 0 || n > len(c.data) {
		n = len(c.data)
	}
	n = copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

// collect reads all pieces and checks that their Raw bytes re-join to the input.
func collect(t testing.TB, input []byte, max int, sizes ...int) (events []ev, kinds []PieceKind) {
	t.Helper()
	if len(sizes) == 0 {
		sizes = []int{0}
	}
	r := NewReader(&chunkReader{data: input, sizes: sizes}, max)
	var joined []byte
	for {
		p, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		if len(p.Raw) == 0 {
			t.Fatalf("empty piece of kind %v", p.Kind)
		}
		joined = append(joined, p.Raw...)
		kinds = append(kinds, p.Kind)
		if p.Kind == PieceEvent {
			e := ev{Type: string(p.Event.Type), Data: string(p.Event.Data)}
			if p.Event.HasID {
				e.ID = string(p.Event.ID)
			}
			events = append(events, e)
		}
	}
	if !bytes.Equal(joined, input) {
		t.Fatalf("pieces re-join to %q, want %q", joined, input)
	}
	return events, kinds
}

var readTests = []struct {
	name  string
	input string
	want  []ev
}{
	{"lf", "data: a\n\ndata: b\n\n", []ev{{"", "a", ""}, {"", "b", ""}}},
	{"crlf", "data: a\r\n\r\ndata: b\r\n\r\n", []ev{{"", "a", ""}, {"", "b", ""}}},
	{"cr only", "data: a\r\rdata: b\r\r", []ev{{"", "a", ""}, {"", "b", ""}}},
	{"mixed line ends", "data: a\r\n\rdata: b\n\r\n", []ev{{"", "a", ""}, {"", "b", ""}}},
	{"bom", "\xEF\xBB\xBFdata: a\n\n", []ev{{"", "a", ""}}},
	{"bom only once", "\xEF\xBB\xBFdata: a\n\n\xEF\xBB\xBFdata: b\n\n", []ev{{"", "a", ""}}},
	{"comments", ": ping\n\ndata: a\n: inside\n\n:\n\n", []ev{{"", "a", ""}}},
	{"multi-line data", "data: a\ndata:b\ndata:  c\n\n", []ev{{"", "a\nb\n c", ""}}},
	{"event type", "event: message_start\ndata: {}\n\n", []ev{{"message_start", "{}", ""}}},
	{"event type last wins", "event: a\nevent: b\ndata: x\n\n", []ev{{"b", "x", ""}}},
	{"id", "id: 7\ndata: x\n\n", []ev{{"", "x", "7"}}},
	{"id with nul ignored", "id: 7\x00\ndata: x\n\n", []ev{{"", "x", ""}}},
	{"retry", "retry: 3000\ndata: x\n\n", []ev{{"", "x", ""}}},
	{"field without colon", "data\n\n", []ev{{"", "", ""}}},
	{"data without colon then value", "data\ndata: a\n\n", []ev{{"", "\na", ""}}},
	{"empty data is dispatched", "data:\n\n", []ev{{"", "", ""}}},
	{"unknown field ignored", "foo: bar\ndata: x\n\n", []ev{{"", "x", ""}}},
	{"no space after colon", "data:x\n\n", []ev{{"", "x", ""}}},
	{"only one space stripped", "data:  x\n\n", []ev{{"", " x", ""}}},
	{"event without data not dispatched", "event: x\n\ndata: y\n\n", []ev{{"", "y", ""}}},
	{"final event without blank line", "data: a\n\ndata: b\n", []ev{{"", "a", ""}, {"", "b", ""}}},
	{"final line without line end", "data: a\n\ndata: b", []ev{{"", "a", ""}, {"", "b", ""}}},
	{"final cut line still a line", "data: {\"type\":\"mess", []ev{{"", "{\"type\":\"mess", ""}}},
	{"done", "data: {}\n\ndata: [DONE]\n\n", []ev{{"", "{}", ""}, {"", "[DONE]", ""}}},
	{"blank lines between events", "\n\n\ndata: a\n\n\n\n", []ev{{"", "a", ""}}},
	{"colon in value", "data: {\"a\":\"b:c\"}\n\n", []ev{{"", "{\"a\":\"b:c\"}", ""}}},
	{"empty stream", "", nil},
	{"only comments", ": a\n: b\n", nil},
}

func TestReader(t *testing.T) {
	for _, tt := range readTests {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte(tt.input)
			got, _ := collect(t, in, 0)
			if !equalEvents(got, tt.want) {
				t.Fatalf("events = %v, want %v", got, tt.want)
			}
			// Every split into two reads, and one byte per read.
			for i := 1; i < len(in); i++ {
				got, _ := collect(t, in, 0, i, 0)
				if !equalEvents(got, tt.want) {
					t.Fatalf("split at %d: events = %v, want %v", i, got, tt.want)
				}
			}
			got, _ = collect(t, in, 0, 1)
			if !equalEvents(got, tt.want) {
				t.Fatalf("byte by byte: events = %v, want %v", got, tt.want)
			}
			// The reference interpretation agrees.
			if ref := referenceEvents(in); !equalEvents(ref, tt.want) {
				t.Fatalf("reference = %v, want %v (test table is wrong)", ref, tt.want)
			}
		})
	}
}

func equalEvents(a, b []ev) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestPieceBoundaries checks that each event is yielded with exactly its own
// bytes, and comments and blank lines between events on their own.
func TestPieceBoundaries(t *testing.T) {
	in := ": hb\n\ndata: a\n\n\nevent: e\ndata: b\r\n\r\n"
	r := NewReader(strings.NewReader(in), 0)
	var got []string
	for {
		p, err := r.Next()
		if err != nil {
			break
		}
		got = append(got, p.Kind.String()+":"+string(p.Raw))
	}
	want := []string{"comment:: hb\n\n", "event:data: a\n\n", "comment:\n", "event:event: e\ndata: b\r\n\r\n"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("pieces = %q, want %q", got, want)
	}
}

// blockingReader hands out its chunks one per Read, then blocks until closed,
// like an upstream body that has sent part of a stream.
type blockingReader struct {
	chunks [][]byte
	block  chan struct{}
}

func (b *blockingReader) Read(p []byte) (int, error) {
	if len(b.chunks) == 0 {
		<-b.block
		return 0, io.EOF
	}
	n := copy(p, b.chunks[0])
	b.chunks = b.chunks[1:]
	return n, nil
}

// TestNoHoldBack checks that an event is yielded as soon as its blank line
// arrives, without waiting for another read (the relay depends on it), also
// when the last byte is the CR of a CRLF pair.
func TestNoHoldBack(t *testing.T) {
	for _, in := range []string{"data: a\n\n", "data: a\r\n\r", ": ping\n", "data: a\r\r"} {
		br := &blockingReader{chunks: [][]byte{[]byte(in)}, block: make(chan struct{})}
		r := NewReader(br, 0)
		done := make(chan *Piece)
		go func() {
			p, _ := r.Next()
			done <- p
		}()
		select {
		case p := <-done:
			if p == nil || len(p.Raw) == 0 {
				t.Fatalf("%q: no piece", in)
			}
		case <-timeAfter():
			close(br.block)
			t.Fatalf("%q: piece held back until more bytes arrive", in)
		}
		close(br.block)
	}
}

func TestCRLFSplitAcrossReads(t *testing.T) {
	// The LF of a CRLF arrives in the next read: it must not be taken for a
	// blank line, which would dispatch early or double-dispatch.
	in := []byte("data: a\r\ndata: b\r\n\r\ndata: c\r\n\r\n")
	for i := 1; i < len(in); i++ {
		for j := i + 1; j < len(in); j++ {
			got, _ := collect(t, in, 0, i, j-i, 0)
			want := []ev{{"", "a\nb", ""}, {"", "c", ""}}
			if !equalEvents(got, want) {
				t.Fatalf("split at %d,%d: %v", i, j, got)
			}
		}
	}
}

func TestTooLong(t *testing.T) {
	long := strings.Repeat("x", 100)
	tests := []struct {
		name  string
		input string
		want  []ev
	}{
		{"long data line", "data: a\n\ndata: " + long + "\n\ndata: b\n\n", []ev{{"", "a", ""}, {"", "b", ""}}},
		{"long line crlf", "data: " + long + "\r\n\r\ndata: b\r\n\r\n", []ev{{"", "b", ""}}},
		{"long comment", ": " + long + "\n\ndata: b\n\n", []ev{{"", "b", ""}}},
		{"long block of short lines", strings.Repeat("data: 0123456789\n", 10) + "\ndata: b\n\n", []ev{{"", "b", ""}}},
		{"long line at eof", "data: " + long, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte(tt.input)
			for _, sizes := range [][]int{{0}, {1}, {7}, {64}} {
				got, kinds := collect(t, in, 64, sizes...)
				if !equalEvents(got, tt.want) {
					t.Fatalf("reads of %v: events = %v, want %v", sizes, got, tt.want)
				}
				var sawMalformed bool
				for _, k := range kinds {
					sawMalformed = sawMalformed || k == PieceMalformed
				}
				if !sawMalformed {
					t.Fatalf("reads of %v: no malformed piece in %v", sizes, kinds)
				}
			}
		})
	}
}

// TestBoundedMemory checks that an endless line never grows the buffer past the limit.
func TestBoundedMemory(t *testing.T) {
	const max = 1 << 16
	src := io.MultiReader(strings.NewReader("data: "), &endless{n: 10 << 20})
	r := NewReader(src, max)
	var total int
	for {
		p, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if p.Kind != PieceMalformed {
			t.Fatalf("kind %v, want malformed", p.Kind)
		}
		total += len(p.Raw)
		if cap(r.buf) > max+1 {
			t.Fatalf("buffer grew to %d", cap(r.buf))
		}
	}
	if total != 6+10<<20 {
		t.Fatalf("yielded %d bytes", total)
	}
}

type endless struct{ n int }

func (e *endless) Read(p []byte) (int, error) {
	if e.n == 0 {
		return 0, io.EOF
	}
	if len(p) > e.n {
		p = p[:e.n]
	}
	for i := range p {
		p[i] = 'x'
	}
	e.n -= len(p)
	return len(p), nil
}

type errAfter struct {
	data []byte
	err  error
}

func (e *errAfter) Read(p []byte) (int, error) {
	if len(e.data) == 0 {
		return 0, e.err
	}
	n := copy(p, e.data)
	e.data = e.data[n:]
	return n, nil
}

func TestReadError(t *testing.T) {
	boom := errors.New("connection reset")
	r := NewReader(&errAfter{data: []byte("data: a\n\ndata: b"), err: boom}, 0)
	p, err := r.Next()
	if err != nil || p.Kind != PieceEvent || string(p.Event.Data) != "a" {
		t.Fatalf("first = %v %v", p, err)
	}
	p, err = r.Next()
	if err != nil || p.Kind != PieceIncomplete || string(p.Raw) != "data: b" {
		t.Fatalf("second = %+v %v", p, err)
	}
	if _, err = r.Next(); err != boom {
		t.Fatalf("err = %v, want %v", err, boom)
	}
}

func TestLastEventID(t *testing.T) {
	r := NewReader(strings.NewReader("id: 1\ndata: a\n\ndata: b\n\nid\ndata: c\n\n"), 0)
	var ids []string
	for {
		_, err := r.Next()
		if err != nil {
			break
		}
		ids = append(ids, string(r.LastEventID()))
	}
	if fmt.Sprint(ids) != "[1 1 ]" {
		t.Fatalf("last ids = %q", ids)
	}
}

// TestFixtures checks the dispatched event counts of the recorded streams.
func TestFixtures(t *testing.T) {
	files, _ := filepath.Glob("../../testdata/fixtures/*.sse")
	if len(files) == 0 {
		t.Fatal("no fixtures in testdata/fixtures")
	}
	for _, f := range files {
		in, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := collect(t, in, 0)
		if ref := referenceEvents(in); !equalEvents(got, ref) {
			t.Errorf("%s: %d events, reference %d", filepath.Base(f), len(got), len(ref))
		}
		if len(got) == 0 {
			t.Errorf("%s: no events", filepath.Base(f))
		}
		// Final message_stop of the SDK fixtures has no line end at all.
		if strings.Contains(f, "sdk-fixture") && got[len(got)-1].Type != "message_stop" {
			t.Errorf("%s: last event %v, want message_stop", filepath.Base(f), got[len(got)-1])
		}
	}
}

// referenceEvents interprets a whole stream the simple way, line by line, as
// the standard describes it, with the end-of-stream leniency.
func referenceEvents(in []byte) []ev {
	s := string(in)
	s = strings.TrimPrefix(s, "\uFEFF")
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	lines := strings.Split(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1] // the text after the last line end
	}
	var out []ev
	var data, typ, lastID string
	var haveData, haveID, block bool
	flush := func() {
		if haveData {
			out = append(out, ev{Type: typ, Data: strings.TrimSuffix(data, "\n"), ID: map[bool]string{true: lastID}[haveID]})
		}
		data, typ, haveData, haveID, block = "", "", false, false, false
	}
	for _, line := range lines {
		if line == "" {
			if block {
				flush()
			}
			continue
		}
		if line[0] == ':' {
			continue
		}
		block = true
		name, value, found := strings.Cut(line, ":")
		if found {
			value = strings.TrimPrefix(value, " ")
		}
		switch name {
		case "data":
			data += value + "\n"
			haveData = true
		case "event":
			typ = value
		case "id":
			if !strings.Contains(value, "\x00") {
				lastID, haveID = value, true
			}
		}
	}
	if block {
		flush()
	}
	return out
}

func FuzzReader(f *testing.F) {
	for _, tt := range readTests {
		f.Add([]byte(tt.input), uint8(0), uint8(3))
	}
	files, _ := filepath.Glob("../../testdata/fixtures/*.sse")
	for _, file := range files {
		if in, err := os.ReadFile(file); err == nil && len(in) < 4096 {
			f.Add(in, uint8(5), uint8(17))
		}
	}
	f.Fuzz(func(t *testing.T, in []byte, a, b uint8) {
		const max = 256
		events, _ := collect(t, in, max, int(a), int(b), int(a)+int(b))
		// Without over-long lines the incremental reader and the simple
		// interpretation agree event for event.
		if !hasLongBlock(in, max) {
			if ref := referenceEvents(in); !equalEvents(events, ref) {
				t.Fatalf("events %v, reference %v", events, ref)
			}
		}
	})
}

// hasLongBlock reports whether some stretch of in between blank lines is
// long enough that the reader may discard it as over-long. It errs on the
// side of saying yes.
func hasLongBlock(in []byte, max int) bool {
	blockStart, lineStart := 0, 0
	for i := 0; i < len(in); i++ {
		if i-blockStart > max/2 {
			return true
		}
		if in[i] != '\n' && in[i] != '\r' {
			continue
		}
		blank := i == lineStart
		if in[i] == '\r' && i+1 < len(in) && in[i+1] == '\n' {
			i++
		}
		lineStart = i + 1
		if blank {
			blockStart = i + 1
		}
	}
	return len(in)-blockStart > max/2
}

func timeAfter() <-chan time.Time { return time.After(time.Second) }

func BenchmarkReader(b *testing.B) {
	chunk := `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":" hello"},"finish_reason":null}]}` + "\n\n"
	in := bytes.Repeat([]byte(chunk), 1000)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	rd := bytes.NewReader(in)
	r := NewReader(rd, 0)
	for b.Loop() {
		rd.Reset(in)
		*r = Reader{r: rd, max: DefaultMaxEventBytes, buf: r.buf[:0], atStart: true, typLen: -1, idLen: -1, dataBuf: r.dataBuf}
		for {
			if _, err := r.Next(); err != nil {
				break
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/event")
}
