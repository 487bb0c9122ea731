package protocol

import (
	"bytes"
	"io"
	"slices"

	"github.com/ttfx/ttfx/internal/jsonscan"
	"github.com/ttfx/ttfx/internal/sse"
)

// DetectEvent guesses the API of a stream from one dispatched event. It
// reports false when the event does not tell (a heartbeat, or an error
// object that several APIs share the shape of); keep feeding events.
func DetectEvent(ev *sse.Event) (API, bool) { return DetectData(ev.Type, ev.Data) }

// Shape is what DetectData reads of one event for the classifiers' Detect
// hooks: its name and the members it has, not their values.
type Shape struct {
	// Data is the event's data, trimmed.
	Data []byte
	// Name is the event's type: the data's top-level "type" string when it
	// has one of at most 48 bytes (raw, escapes not decoded), else the SSE
	// event type.
	Name []byte
	// Object is the raw value of a top-level "object" string member.
	Object []byte
	// Keys are the data's top-level member names, in order (raw).
	Keys [][]byte
	// NestedError is set when the data has an "error" member that is an
	// object; ErrorKeys are that object's member names.
	NestedError bool
	ErrorKeys   [][]byte
}

// Has reports whether the data has the top-level member key.
func (s *Shape) Has(key string) bool {
	return slices.ContainsFunc(s.Keys, func(k []byte) bool { return string(k) == key })
}

// ErrorHas reports whether the nested error object has the member key.
func (s *Shape) ErrorHas(key string) bool {
	return slices.ContainsFunc(s.ErrorKeys, func(k []byte) bool { return string(k) == key })
}

// DetectData is DetectEvent for an event's type and data. Every registered
// classifier's Detect scores the event's Shape and the highest score above
// 0 wins. The units share one scale, each hook's doc saying what it scores:
// 10 for data only one API sends (an end marker); 8–9 for an event name, or
// an error event's form, only one API uses; 6–7 for one that is most likely
// one API's; 4–5 for a body's members; 2–3 for the members of an error
// object several APIs nest.
func DetectData(typ, data []byte) (API, bool) {
	s := Shape{Data: TrimSpace(data), Name: typ}
	var t [48]byte
	tn := -1
	d := jsonscan.New(s.Data)
	if d.Peek() == jsonscan.Object {
		d.Object()
		for {
			k, ok := d.Key()
			if !ok {
				break
			}
			s.Keys = append(s.Keys, k)
			switch string(k) {
			case "type":
				if v := RawStr(&d); v != nil && len(v) <= len(t) {
					tn = copy(t[:], v)
				}
			case "object":
				s.Object = RawStr(&d)
			case "error":
				if d.Peek() != jsonscan.Object {
					d.Skip()
					continue
				}
				s.NestedError = true
				d.Object()
				for {
					k, ok := d.Key()
					if !ok {
						break
					}
					s.ErrorKeys = append(s.ErrorKeys, k)
					d.Skip()
				}
			default:
				d.Skip()
			}
		}
	}
	if tn >= 0 {
		s.Name = t[:tn]
	}
	var best API
	score := 0
	for _, api := range APIs() {
		if cl := classifiers[api]; cl.Detect != nil {
			if n := cl.Detect(&s); n > score {
				best, score = api, n
			}
		}
	}
	return best, score > 0
}

// Detect guesses the API of a recorded stream from its first events that
// tell (see DetectData).
func Detect(stream []byte) (API, bool) {
	r := sse.NewReader(bytes.NewReader(stream), 0)
	for {
		p, err := r.Next()
		if err == io.EOF || err != nil {
			return "", false
		}
		if p.Kind != sse.PieceEvent {
			continue
		}
		if api, ok := DetectEvent(&p.Event); ok {
			return api, true
		}
	}
}
