package store

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/ttfx/ttfx/internal/record"
)

// Limits on what a record may hold. Request ids are the gateway's own;
// the other strings are identifiers from the configuration, a model name the
// client sent or a short error summary, so the limits are generous for what
// they are and small enough that no column can carry a body.
const (
	MaxIDLen     = 128 // bytes of a request id
	MaxNameLen   = 256 // bytes of every other string but errors
	MaxErrorLen  = 512 // bytes of an error summary
	MaxAttempts  = 64  // attempts kept per request
	MaxLabels    = 32  // diagnosis labels kept per request
	maxEventsCnt = 1<<31 - 1
)

// Validate reports whether r can be stored: it needs a request id of 1 to
// MaxIDLen bytes of valid UTF-8 without control characters (ids appear in
// URLs and cursors, and are never altered), and a timestamp. Every other
// string is stored cleaned (see clean) rather than refused.
func Validate(r *record.Record) error {
	id := r.RequestID
	switch {
	case id == "":
		return fmt.Errorf("%w: empty request id", ErrInvalidRecord)
	case len(id) > MaxIDLen:
		return fmt.Errorf("%w: request id of %d bytes (max %d)", ErrInvalidRecord, len(id), MaxIDLen)
	case !utf8.ValidString(id):
		return fmt.Errorf("%w: request id is not valid UTF-8", ErrInvalidRecord)
	case strings.ContainsFunc(id, func(c rune) bool { return c < 0x20 || c == 0x7f }):
		return fmt.Errorf("%w: request id contains control characters", ErrInvalidRecord)
	case r.Timestamp.IsZero():
		return fmt.Errorf("%w: request %s has no timestamp", ErrInvalidRecord, id)
	case r.Timestamp.Year() < 1970 || r.Timestamp.Year() > 2261:
		// Stored as Unix nanoseconds in a BIGINT.
		return fmt.Errorf("%w: request %s has timestamp %v outside 1970..2261", ErrInvalidRecord, id, r.Timestamp)
	}
	return nil
}

// clean makes s storable on both engines the same way: valid UTF-8 (invalid
// bytes become U+FFFD), no NUL (PostgreSQL's text type refuses both), and
// at most max bytes, cut at a rune boundary. A model name is the one string
// a client chooses, and a client must not be able to make a record
// unstorable with it.
func Clean(s string, max int) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "")
	}
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	return s
}

// ClampCount keeps a counter within the INTEGER column on both engines.
func ClampCount(n int) int {
	if n < 0 {
		return 0
	}
	if n > maxEventsCnt {
		return maxEventsCnt
	}
	return n
}
