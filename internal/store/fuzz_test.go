package store_test

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ttfx/ttfx/internal/store"

	"github.com/ttfx/ttfx/internal/record"
)

// FuzzCursor: a cursor comes from the client. Decoding never panics, and
// whatever decodes re-encodes to a cursor that decodes the same.
func FuzzCursor(f *testing.F) {
	r := record.Record{RequestID: "req-1", Timestamp: time.Unix(0, 1741944400000000000)}
	f.Add(store.EncodeCursor(&r))
	f.Add("")
	f.Add("MTIzLg")
	f.Add("LTEuYQ")
	f.Add("!!!")
	f.Fuzz(func(t *testing.T, c string) {
		ts, id, err := store.DecodeCursor(c)
		if err != nil {
			return
		}
		again := store.EncodeCursor(&record.Record{RequestID: id, Timestamp: time.Unix(0, ts)})
		ts2, id2, err := store.DecodeCursor(again)
		if err != nil || ts2 != ts || id2 != id {
			t.Fatalf("%q -> (%d, %q) -> %q -> (%d, %q, %v)", c, ts, id, again, ts2, id2, err)
		}
	})
}

// FuzzClean: whatever a client puts in a model name is stored as valid
// UTF-8 without NUL, within the limit, and cleaning is idempotent.
func FuzzClean(f *testing.F) {
	f.Add("gpt-4o", 256)
	f.Add("a\x00b\xff\xfeé", 3)
	f.Fuzz(func(t *testing.T, s string, max int) {
		if max < 0 || max > 1024 {
			return
		}
		c := store.Clean(s, max)
		if len(c) > max || !utf8Valid(c) || containsNUL(c) {
			t.Fatalf("clean(%q, %d) = %q", s, max, c)
		}
		if store.Clean(c, max) != c {
			t.Fatalf("clean is not idempotent on %q", s)
		}
	})
}

func utf8Valid(s string) bool { return utf8.ValidString(s) }

func containsNUL(s string) bool { return strings.IndexByte(s, 0) >= 0 }
