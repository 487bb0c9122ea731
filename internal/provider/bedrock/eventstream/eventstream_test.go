package eventstream

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"testing"
	"testing/iotest"
	"time"

	awses "github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
)

// converseFrames are the frames of a ConverseStream answer as Bedrock
// sends them (the payload shapes of the Converse API reference).
func converseFrames() [][]byte {
	var out [][]byte
	add := func(t, p string) { out = append(out, AppendEvent(nil, t, []byte(p))) }
	add("messageStart", `{"p":"abcd","role":"assistant"}`)
	add("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"reasoningContent":{"text":"Thinking"}},"p":"abc"}`)
	add("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"Hello"},"p":"abcdefgh"}`)
	add("contentBlockStop", `{"contentBlockIndex":0,"p":"ab"}`)
	add("messageStop", `{"p":"abcdefghijkl","stopReason":"end_turn"}`)
	add("metadata", `{"metrics":{"latencyMs":412},"p":"ab","usage":{"inputTokens":12,"outputTokens":7,"totalTokens":19}}`)
	return out
}

func readAll(t testing.TB, r *Reader) (types []string, payloads []string, err error) {
	for {
		m, err := r.Next()
		if err != nil {
			return types, payloads, err
		}
		types = append(types, string(m.String(":event-type")))
		payloads = append(payloads, string(m.Payload))
	}
}

func TestReaderSplitsAndJoins(t *testing.T) {
	frames := converseFrames()
	stream := bytes.Join(frames, nil)
	readers := map[string]func() io.Reader{
		"one read":      func() io.Reader { return bytes.NewReader(stream) },
		"byte by byte":  func() io.Reader { return iotest.OneByteReader(bytes.NewReader(stream)) },
		"half reads":    func() io.Reader { return iotest.HalfReader(bytes.NewReader(stream)) },
		"data with EOF": func() io.Reader { return iotest.DataErrReader(bytes.NewReader(stream)) },
	}
	for name, mk := range readers {
		t.Run(name, func(t *testing.T) {
			types, payloads, err := readAll(t, NewReader(mk(), 0))
			if err != io.EOF {
				t.Fatalf("err = %v, want io.EOF", err)
			}
			want := []string{"messageStart", "contentBlockDelta", "contentBlockDelta", "contentBlockStop", "messageStop", "metadata"}
			if len(types) != len(want) {
				t.Fatalf("types = %v, want %v", types, want)
			}
			for i := range want {
				if types[i] != want[i] {
					t.Errorf("frame %d type %q, want %q", i, types[i], want[i])
				}
				// The payload is what the frame carried.
				m := frames[i]
				if !bytes.Contains(m, []byte(payloads[i])) || payloads[i][0] != '{' {
					t.Errorf("frame %d payload %q not the frame's", i, payloads[i])
				}
			}
		})
	}
}

// A frame is yielded the moment its last byte arrives: the reader reads no
// further, and OnWait runs before every read (where the relay flushes).
func TestReaderYieldsWithoutReadingAhead(t *testing.T) {
	frames := converseFrames()
	pr, pw := io.Pipe()
	r := NewReader(pr, 0)
	waits := 0
	r.OnWait(func() { waits++ })
	go func() {
		pw.Write(frames[0][:5])
		pw.Write(frames[0][5:])
		// Two frames in one write.
		pw.Write(append(append([]byte{}, frames[1]...), frames[2]...))
	}()
	for i := 0; i < 3; i++ {
		done := make(chan error, 1)
		go func() {
			m, err := r.Next()
			if err == nil && !bytes.Equal(m.Raw, frames[i]) {
				err = errors.New("raw frame differs")
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("frame %d: %v", i, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("frame %d was not yielded when complete", i)
		}
	}
	if waits != 3 { // two reads for frame 0, one for frames 1 and 2
		t.Errorf("OnWait ran %d times, want 3", waits)
	}
	pw.Close()
	if _, err := r.Next(); err != io.EOF {
		t.Errorf("after close: %v, want io.EOF", err)
	}
}

func TestReaderErrors(t *testing.T) {
	frames := converseFrames()
	good := frames[0]
	flip := func(i int) []byte {
		b := bytes.Clone(frames[1])
		b[i] ^= 0x40
		return b
	}
	huge := AppendEvent(nil, "contentBlockDelta", bytes.Repeat([]byte("x"), 5000))
	cases := []struct {
		name   string
		stream []byte
		max    int
		want   error
		before int // frames yielded before the error
	}{
		{"payload byte flipped", append(bytes.Clone(good), flip(len(frames[1])-10)...), 0, ErrMessageCRC, 1},
		{"message crc flipped", append(bytes.Clone(good), flip(len(frames[1])-1)...), 0, ErrMessageCRC, 1},
		{"length flipped", append(bytes.Clone(good), flip(2)...), 0, ErrPreludeCRC, 1},
		{"prelude crc flipped", append(bytes.Clone(good), flip(9)...), 0, ErrPreludeCRC, 1},
		{"frame over the bound", append(bytes.Clone(good), huge...), 4096, ErrTooLarge, 1},
		{"cut mid frame", append(bytes.Clone(good), frames[1][:len(frames[1])-3]...), 0, ErrCut, 1},
		{"cut mid prelude", append(bytes.Clone(good), frames[1][:7]...), 0, ErrCut, 1},
		{"sse instead", []byte("data: {\"a\":1}\n\n"), 0, ErrPreludeCRC, 0},
		{"headers malformed", malformedHeaders(), 0, ErrMalformed, 0},
		{"length below minimum", prelude(8, 0), 0, ErrMalformed, 0},
		{"headers longer than frame", prelude(40, 30), 0, ErrMalformed, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, mk := range []func([]byte) io.Reader{
				func(b []byte) io.Reader { return bytes.NewReader(b) },
				func(b []byte) io.Reader { return iotest.OneByteReader(bytes.NewReader(b)) },
			} {
				r := NewReader(mk(c.stream), c.max)
				types, _, err := readAll(t, r)
				if !errors.Is(err, c.want) {
					t.Fatalf("err = %v, want %v", err, c.want)
				}
				var fe *FrameError
				if !errors.As(err, &fe) || fe.Offset != int64(len(good)*c.before) {
					t.Errorf("error %v does not say the frame started at %d", err, len(good)*c.before)
				}
				if len(types) != c.before {
					t.Errorf("yielded %d frames before the error, want %d", len(types), c.before)
				}
				// Sticky: the stream cannot be resynchronised.
				if _, err2 := r.Next(); !errors.Is(err2, c.want) {
					t.Errorf("second Next: %v", err2)
				}
				if c.want == ErrTooLarge && cap(r.buf) > c.max {
					t.Errorf("buffer grew to %d past the bound %d", cap(r.buf), c.max)
				}
			}
		})
	}
}

// An underlying read error other than EOF is returned as it is (a reset
// connection is not a malformed frame).
func TestReaderUnderlyingError(t *testing.T) {
	boom := errors.New("connection reset")
	frames := converseFrames()
	r := NewReader(io.MultiReader(bytes.NewReader(frames[0]), bytes.NewReader(frames[1][:9]), iotest.ErrReader(boom)), 0)
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want %v", err, boom)
	}
	if r.Buffered() != 9 {
		t.Errorf("Buffered = %d, want 9", r.Buffered())
	}
}

func prelude(total, hlen uint32) []byte {
	b := []byte{byte(total >> 24), byte(total >> 16), byte(total >> 8), byte(total), byte(hlen >> 24), byte(hlen >> 16), byte(hlen >> 8), byte(hlen)}
	c := crc32sum(b)
	b = append(b, byte(c>>24), byte(c>>16), byte(c>>8), byte(c))
	return append(b, make([]byte, max(int(total)-12, 0))...)
}

func crc32sum(b []byte) uint32 { return crcIEEE(b) }

func crcIEEE(b []byte) uint32 { return crc32.ChecksumIEEE(b) }

func be32(b []byte) uint32 { return binary.BigEndian.Uint32(b) }

// fixCRCs recomputes both CRCs of frame f after a change.
func fixCRCs(f []byte) {
	binary.BigEndian.PutUint32(f[8:], crcIEEE(f[:8]))
	binary.BigEndian.PutUint32(f[len(f)-4:], crcIEEE(f[:len(f)-4]))
}

// malformedHeaders is a frame with valid CRCs whose header declares a
// string longer than the headers.
func malformedHeaders() []byte {
	f := Append(nil, []Header{{"abc", "value"}}, []byte("{}"))
	// Lengthen the declared value past the headers and fix both CRCs.
	f[12+1+3+1+1] = 200
	fixCRCs(f)
	return f
}

// The SDK's encoder and this Reader agree, and this package's encoder and
// the SDK's decoder agree, on every header type.
func TestAgainstAWSSDK(t *testing.T) {
	msg := awses.Message{
		Headers: awses.Headers{
			{Name: ":event-type", Value: awses.StringValue("contentBlockDelta")},
			{Name: ":message-type", Value: awses.StringValue("event")},
			{Name: "b", Value: awses.BoolValue(true)},
			{Name: "f", Value: awses.BoolValue(false)},
			{Name: "i8", Value: awses.Int8Value(-3)},
			{Name: "i16", Value: awses.Int16Value(300)},
			{Name: "i32", Value: awses.Int32Value(70000)},
			{Name: "i64", Value: awses.Int64Value(1 << 40)},
			{Name: "bytes", Value: awses.BytesValue([]byte{1, 2, 3})},
			{Name: "ts", Value: awses.TimestampValue(time.UnixMilli(1700000000000))},
			{Name: "uuid", Value: awses.UUIDValue{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}},
		},
		Payload: []byte(`{"contentBlockIndex":0,"delta":{"text":"Hi"}}`),
	}
	var buf bytes.Buffer
	if err := awses.NewEncoder().Encode(&buf, msg); err != nil {
		t.Fatal(err)
	}
	r := NewReader(iotest.OneByteReader(&buf), 0)
	m, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Payload) != string(msg.Payload) || string(m.String(":event-type")) != "contentBlockDelta" {
		t.Errorf("payload %q, event type %q", m.Payload, m.String(":event-type"))
	}
	n := 0
	m.EachHeader(func(name []byte, typ byte, val []byte) { n++ })
	if n != len(msg.Headers) {
		t.Errorf("%d headers, want %d", n, len(msg.Headers))
	}
	if typ, v, ok := m.Header("i32"); !ok || typ != TypeInt || len(v) != 4 || v[1] != 1 {
		t.Errorf("i32 header: %d %v %v", typ, v, ok)
	}

	for _, f := range converseFrames() {
		got, err := awses.NewDecoder().Decode(bytes.NewReader(f), nil)
		if err != nil {
			t.Fatalf("SDK decoder refused our frame: %v", err)
		}
		if got.Headers.Get(":message-type").String() != "event" || got.Headers.Get(":content-type").String() != "application/json" {
			t.Errorf("SDK read headers %v", got.Headers)
		}
	}
	ex := AppendException(nil, "throttlingException", []byte(`{"message":"slow down"}`))
	got, err := awses.NewDecoder().Decode(bytes.NewReader(ex), nil)
	if err != nil || got.Headers.Get(":exception-type").String() != "throttlingException" {
		t.Fatalf("exception: %v %v", got.Headers, err)
	}
}

// Reading a stream of frames allocates nothing per frame once the buffer
// has grown.
func TestReaderAllocs(t *testing.T) {
	stream := bytes.Repeat(bytes.Join(converseFrames(), nil), 50)
	br := bytes.NewReader(stream)
	r := NewReader(br, 0)
	allocs := testing.AllocsPerRun(20, func() {
		br.Reset(stream)
		r.err, r.start, r.buf = nil, 0, r.buf[:0]
		for {
			m, err := r.Next()
			if err != nil {
				break
			}
			_ = m.String(":event-type")
		}
	})
	if allocs > 0 {
		t.Errorf("%.1f allocations per stream of 300 frames, want 0", allocs)
	}
}

func BenchmarkReader(b *testing.B) {
	frames := converseFrames()
	stream := bytes.Repeat(bytes.Join(frames, nil), 100)
	br := bytes.NewReader(stream)
	r := NewReader(br, 0)
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		br.Reset(stream)
		r.err, r.start, r.buf = nil, 0, r.buf[:0]
		for {
			m, err := r.Next()
			if err != nil {
				break
			}
			if len(m.String(":event-type")) > 0 {
				n++
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/frame")
}

// FuzzReader feeds arbitrary bytes, and real-shaped frames with bytes
// changed, split at every read size: the Reader never panics, never yields
// a frame whose CRC does not hold, and ends with io.EOF or an error.
func FuzzReader(f *testing.F) {
	all := bytes.Join(converseFrames(), nil)
	f.Add(all, uint8(0))
	f.Add(all, uint8(3))
	f.Add(AppendException(nil, "throttlingException", []byte(`{"message":"Too many requests"}`)), uint8(1))
	f.Add(Append(nil, []Header{{":event-type", "chunk"}, {":message-type", "event"}}, []byte(`{"bytes":"eyJ0eXBlIjoicGluZyJ9"}`)), uint8(7))
	f.Add(all[:len(all)-5], uint8(2))
	f.Add(malformedHeaders(), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, split uint8) {
		var src io.Reader = bytes.NewReader(data)
		if split > 0 {
			src = &chunkReader{b: data, n: int(split)}
		}
		r := NewReader(src, 2048)
		for i := 0; ; i++ {
			m, err := r.Next()
			if err != nil {
				if i > len(data)/minFrame+1 {
					t.Fatalf("%d frames from %d bytes", i, len(data))
				}
				return
			}
			if crcIEEE(m.Raw[:len(m.Raw)-4]) != be32(m.Raw[len(m.Raw)-4:]) {
				t.Fatal("yielded a frame whose CRC does not hold")
			}
			m.EachHeader(func([]byte, byte, []byte) {})
		}
	})
}

type chunkReader struct {
	b []byte
	n int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), c.n, len(c.b))
	copy(p, c.b[:n])
	c.b = c.b[n:]
	return n, nil
}
