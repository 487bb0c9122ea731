package sim

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/ttfx/ttfx/internal/sse"
)

// Replay timing convention. A recorded .sse file is served byte for byte,
// event by event. It may carry its own timing in SSE comment lines of the
// form
//
//	: t=MS          the next event is sent MS milliseconds after receipt
//	: headers=MS    the response headers are sent at MS
//
// (MS may have a fraction: "t=6350.5"). Such a line must stand in the
// comment lines before an event (after the previous event's blank line);
// it is a directive to the simulator and is not sent. Other comments are
// part of the stream and are sent like events. In a file with timing, an
// event without its own t= goes out with the one before it; the headers go
// out at headers=, else at the profile's headers_ms (but never after the
// first event). A t= line after the last event is when the connection
// closes (an upstream whose end of stream comes well after its terminal
// event); without it the connection closes after the last event. A file
// without any t= line is sent with a fixed gap (replay_gap_ms, default
// 10 ms) between events, from the headers on.

// recording is a parsed replay file.
type recording struct {
	headers    time.Duration
	hasHeaders bool
	timed      bool
	frames     []recFrame
	end        time.Duration // when the connection closes, if hasEnd
	hasEnd     bool
}

type recFrame struct {
	at   time.Duration
	set  bool // at came from a t= line
	data []byte
}

var errReplaySchedule = errors.New("a replay profile has no computed schedule: its times are the file's")

func loadRecording(path string) (*recording, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read replay: %w", err)
	}
	rec, err := parseRecording(data)
	if err != nil {
		return nil, fmt.Errorf("replay %s: %w", path, err)
	}
	return rec, nil
}

// parseRecording splits data into the frames to send and their times.
func parseRecording(data []byte) (*recording, error) {
	rec := &recording{}
	rd := sse.NewReader(bytes.NewReader(data), 0)
	var pending []byte // bytes waiting for the next frame (blank lines, untimed leftovers)
	var at time.Duration
	atSet := false
	for {
		p, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if p.Kind != sse.PieceComment {
			fr := recFrame{at: at, set: atSet, data: append(append([]byte(nil), pending...), p.Raw...)}
			rec.frames = append(rec.frames, fr)
			pending, atSet = nil, false
			continue
		}
		// A comment piece: take the directives out, keep the rest.
		var kept []byte
		content := false
		for rest := p.Raw; len(rest) > 0; {
			line, next := cutLine(rest)
			rest = next
			body := bytes.TrimRight(line, "\r\n")
			if v, ok := directive(body, "t="); ok {
				at, atSet, rec.timed = v, true, true
				continue
			}
			if v, ok := directive(body, "headers="); ok {
				rec.headers, rec.hasHeaders = v, true
				continue
			}
			if len(body) > 0 {
				content = true
			}
			kept = append(kept, line...)
		}
		pending = append(pending, kept...)
		if content {
			// A real comment of the recording (a provider's keep-alive):
			// it is sent at its own time, like an event.
			rec.frames = append(rec.frames, recFrame{at: at, set: atSet, data: pending})
			pending, atSet = nil, false
		}
	}
	if len(rec.frames) == 0 {
		return nil, errors.New("no events to replay")
	}
	if len(pending) > 0 {
		last := &rec.frames[len(rec.frames)-1]
		last.data = append(last.data, pending...)
	}
	if atSet {
		rec.end, rec.hasEnd = at, true
	}
	return rec, nil
}

// cutLine returns the first line of b with its terminator (LF, CRLF or CR)
// and the rest.
func cutLine(b []byte) (line, rest []byte) {
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '\n':
			return b[:i+1], b[i+1:]
		case '\r':
			if i+1 < len(b) && b[i+1] == '\n' {
				return b[:i+2], b[i+2:]
			}
			return b[:i+1], b[i+1:]
		}
	}
	return b, nil
}

// directive parses a comment line ": NAME=MS".
func directive(line []byte, name string) (time.Duration, bool) {
	if len(line) == 0 || line[0] != ':' {
		return 0, false
	}
	v := bytes.TrimSpace(line[1:])
	if !bytes.HasPrefix(v, []byte(name)) {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(v[len(name):]), 64)
	if err != nil || f < 0 || f > 1e9 {
		return 0, false
	}
	return time.Duration(f * float64(time.Millisecond)), true
}

// schedule returns the headers time and each frame's due time for p.
func (rec *recording) schedule(p Profile) (time.Duration, []time.Duration) {
	headers := msDur(p.HeadersMs)
	if rec.hasHeaders {
		headers = rec.headers
	}
	times := make([]time.Duration, len(rec.frames))
	if !rec.timed {
		gap := msDur(p.ReplayGapMs)
		if gap <= 0 {
			gap = defaultReplayGap
		}
		for i := range times {
			times[i] = headers + time.Duration(i)*gap
		}
		return headers, times
	}
	prev := time.Duration(-1)
	for i, f := range rec.frames {
		t := f.at
		if !f.set {
			t = max(prev, 0)
		}
		t = max(t, prev) // the file's order wins over a time that goes back
		times[i], prev = t, t
	}
	if len(times) > 0 && headers > times[0] {
		headers = times[0]
	}
	return headers, times
}

// replay serves a recorded stream.
func (x *exchange) replay(sv *served, req Request) {
	if !req.Stream {
		x.fail(errorf(http.StatusBadRequest, fmt.Sprintf("The profile %q replays a recorded stream; send a streaming request.", sv.name)), "")
		return
	}
	headers, times := sv.rec.schedule(sv.p)
	if !x.waitUntil(headers) {
		return
	}
	rc := http.NewResponseController(x.w)
	setStreamHeaders(x.w.Header())
	x.w.WriteHeader(http.StatusOK)
	x.info.Status, x.written = http.StatusOK, true
	if err := rc.Flush(); err != nil {
		x.cancelled()
		return
	}
	for i, f := range sv.rec.frames {
		if !x.waitUntil(times[i]) {
			return
		}
		if _, err := x.w.Write(f.data); err != nil {
			x.cancelled()
			return
		}
		if err := rc.Flush(); err != nil {
			x.cancelled()
			return
		}
		x.info.Events += countEvents(f.data)
	}
	if sv.rec.hasEnd {
		x.waitUntil(sv.rec.end)
	}
}
