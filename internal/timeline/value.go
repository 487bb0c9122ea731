package timeline

import (
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Offset is an instant of a request given as the time since that request's
// t0, or absent. Every Offset of a request shares that one origin, so two of
// them can be subtracted (Sub) to give the gap between two marks. The zero
// value is absent: a mark that did not happen is never 0.
type Offset struct {
	d  time.Duration
	ok bool
}

// Span is the length of a phase measured with its own origin (a local phase,
// or t2 − t1 of an attempt), or absent. A Span cannot be subtracted from an
// Offset: they have different origins (SPEC.md §1). The zero value is absent.
type Span struct {
	d  time.Duration
	ok bool
}

// Rate is a speed in units per second (visible output tokens per second), or
// absent. The zero value is absent.
type Rate struct {
	v  float64
	ok bool
}

// At returns the present Offset d.
func At(d time.Duration) Offset { return Offset{d: d, ok: true} }

// SpanOf returns the present Span d.
func SpanOf(d time.Duration) Span { return Span{d: d, ok: true} }

// RateOf returns the present Rate v.
func RateOf(v float64) Rate { return Rate{v: v, ok: true} }

// Get returns the offset and whether it is present.
func (o Offset) Get() (time.Duration, bool) { return o.d, o.ok }

// Valid reports whether the offset is present.
func (o Offset) Valid() bool { return o.ok }

// Ms returns the offset in float milliseconds and whether it is present.
func (o Offset) Ms() (float64, bool) { return toMs(o.d), o.ok }

// Sub returns the gap o − from between two marks of the same request, absent
// when either mark is.
func (o Offset) Sub(from Offset) Span {
	if !o.ok || !from.ok {
		return Span{}
	}
	return Span{d: o.d - from.d, ok: true}
}

// Get returns the span and whether it is present.
func (s Span) Get() (time.Duration, bool) { return s.d, s.ok }

// Valid reports whether the span is present.
func (s Span) Valid() bool { return s.ok }

// Ms returns the span in float milliseconds and whether it is present.
func (s Span) Ms() (float64, bool) { return toMs(s.d), s.ok }

// Add returns s + t, present when either is: summing local phases treats a
// phase that did not happen as taking no time.
func (s Span) Add(t Span) Span {
	return Span{d: s.d + t.d, ok: s.ok || t.ok}
}

// Get returns the rate and whether it is present.
func (r Rate) Get() (float64, bool) { return r.v, r.ok }

// Valid reports whether the rate is present.
func (r Rate) Valid() bool { return r.ok }

func (o Offset) String() string { return fmtMs(o.d, o.ok) }
func (s Span) String() string   { return fmtMs(s.d, s.ok) }
func (r Rate) String() string {
	if !r.ok {
		return "-"
	}
	return strconv.FormatFloat(r.v, 'f', 1, 64)
}

func fmtMs(d time.Duration, ok bool) string {
	if !ok {
		return "-"
	}
	return strconv.FormatFloat(toMs(d), 'f', 1, 64) + "ms"
}

// toMs converts to float milliseconds, keeping nanoseconds: a float64 holds
// any duration under 104 days exactly to the nanosecond.
func toMs(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// fromMs converts float milliseconds back, rounding to the nearest
// nanosecond, so that values read from JSON or SQL round-trip exactly.
func fromMs(ms float64) (time.Duration, error) {
	if math.IsNaN(ms) || math.IsInf(ms, 0) || math.Abs(ms) > float64(math.MaxInt64/int64(time.Millisecond)) {
		return 0, fmt.Errorf("timeline: %v ms out of range", ms)
	}
	return time.Duration(math.Round(ms * float64(time.Millisecond))), nil
}

// The JSON and SQL edge: float milliseconds, or null when absent.

func marshalMs(d time.Duration, ok bool) ([]byte, error) {
	if !ok {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, toMs(d), 'f', -1, 64), nil
}

func unmarshalMs(b []byte) (time.Duration, bool, error) {
	if string(b) == "null" {
		return 0, false, nil
	}
	var ms float64
	if err := json.Unmarshal(b, &ms); err != nil {
		return 0, false, fmt.Errorf("timeline: milliseconds: %w", err)
	}
	d, err := fromMs(ms)
	return d, err == nil, err
}

func scanMs(src any) (time.Duration, bool, error) {
	var ms float64
	switch v := src.(type) {
	case nil:
		return 0, false, nil
	case float64:
		ms = v
	case float32:
		ms = float64(v)
	case int64:
		ms = float64(v)
	case []byte:
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return 0, false, fmt.Errorf("timeline: scan %q: %w", v, err)
		}
		ms = f
	case string:
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, false, fmt.Errorf("timeline: scan %q: %w", v, err)
		}
		ms = f
	default:
		return 0, false, fmt.Errorf("timeline: cannot scan %T as milliseconds", src)
	}
	d, err := fromMs(ms)
	return d, err == nil, err
}

func valueMs(d time.Duration, ok bool) (driver.Value, error) {
	if !ok {
		return nil, nil
	}
	return toMs(d), nil
}

// MarshalJSON writes float milliseconds, or null when absent.
func (o Offset) MarshalJSON() ([]byte, error) { return marshalMs(o.d, o.ok) }

// UnmarshalJSON reads float milliseconds or null.
func (o *Offset) UnmarshalJSON(b []byte) (err error) {
	o.d, o.ok, err = unmarshalMs(b)
	return err
}

// Value stores float milliseconds, or NULL when absent.
func (o Offset) Value() (driver.Value, error) { return valueMs(o.d, o.ok) }

// Scan reads float milliseconds or NULL.
func (o *Offset) Scan(src any) (err error) {
	o.d, o.ok, err = scanMs(src)
	return err
}

// MarshalJSON writes float milliseconds, or null when absent.
func (s Span) MarshalJSON() ([]byte, error) { return marshalMs(s.d, s.ok) }

// UnmarshalJSON reads float milliseconds or null.
func (s *Span) UnmarshalJSON(b []byte) (err error) {
	s.d, s.ok, err = unmarshalMs(b)
	return err
}

// Value stores float milliseconds, or NULL when absent.
func (s Span) Value() (driver.Value, error) { return valueMs(s.d, s.ok) }

// Scan reads float milliseconds or NULL.
func (s *Span) Scan(src any) (err error) {
	s.d, s.ok, err = scanMs(src)
	return err
}

// MarshalJSON writes the rate, or null when absent.
func (r Rate) MarshalJSON() ([]byte, error) {
	if !r.ok {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, r.v, 'f', -1, 64), nil
}

// UnmarshalJSON reads a number or null.
func (r *Rate) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*r = Rate{}
		return nil
	}
	if err := json.Unmarshal(b, &r.v); err != nil {
		return fmt.Errorf("timeline: rate: %w", err)
	}
	r.ok = true
	return nil
}

// Value stores the rate, or NULL when absent.
func (r Rate) Value() (driver.Value, error) {
	if !r.ok {
		return nil, nil
	}
	return r.v, nil
}

// Scan reads a number or NULL.
func (r *Rate) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*r = Rate{}
	case float64:
		*r = Rate{v: v, ok: true}
	case int64:
		*r = Rate{v: float64(v), ok: true}
	case []byte:
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return fmt.Errorf("timeline: scan rate %q: %w", v, err)
		}
		*r = Rate{v: f, ok: true}
	default:
		return fmt.Errorf("timeline: cannot scan %T as a rate", src)
	}
	return nil
}
