package telemetry

import (
	"sync"
	"unicode/utf8"

	"github.com/ttfx/ttfx/internal/record"
)

// OtherModel is the model label of every model name that has no label of
// its own: unknown to the configuration and never accepted by an upstream,
// too long, or past the limit of distinct names.
const OtherModel = "other"

// DefaultMaxModels bounds the model names admitted at run time when the
// configuration gives no limit (config.Metrics.MaxModels).
const DefaultMaxModels = 100

// maxModelLen is the longest model name kept as a label. Real model names
// are short ("gpt-4o-2024-08-06", "claude-sonnet-4-5-20250929"); a longer
// one is a client sending junk.
const maxModelLen = 128

// Models decides the model label of a request, for Prometheus and for
// OpenTelemetry alike (share one, so both name a model the same way). A
// client can name any model, so the raw name would let one client create
// unbounded series; a name is admitted only when the operator configured
// it exactly, or an upstream accepted it (some attempt answered 2xx —
// providers answer 404 to models they do not serve), and only up to max
// run-time admissions. A name is admitted from its first accepted request
// on: requests for it that failed before that count under "other".
// Safe for concurrent use.
type Models struct {
	mu       sync.RWMutex // guards known and admitted
	known    map[string]struct{}
	admitted int // names added at run time (configured names do not count)
	max      int
}

// NewModels returns the model labels with the configured names always
// admitted and at most max (0 = DefaultMaxModels) others.
func NewModels(configured []string, max int) *Models {
	if max <= 0 {
		max = DefaultMaxModels
	}
	s := &Models{known: map[string]struct{}{}, max: max}
	for _, m := range configured {
		if labelable(m) {
			s.known[m] = struct{}{}
		}
	}
	return s
}

// Label returns the model label of rec; "" when the request named no
// model (GET /v1/models, a request rejected before its body was read).
func (s *Models) Label(rec *record.Record) string {
	m := rec.Model
	if m == "" {
		return ""
	}
	s.mu.RLock()
	_, ok := s.known[m]
	s.mu.RUnlock()
	if ok {
		return m
	}
	if !labelable(m) || !served(rec) {
		return OtherModel
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.known[m]; ok {
		return m
	}
	if s.admitted >= s.max {
		return OtherModel
	}
	s.known[m] = struct{}{}
	s.admitted++
	return m
}

// labelable reports whether m may be a label value: Prometheus refuses
// invalid UTF-8 (a model name may come from the URL path, where any
// bytes can be percent-encoded).
func labelable(m string) bool {
	return m != "" && len(m) <= maxModelLen && utf8.ValidString(m)
}

// served reports whether a configured channel served the request
// successfully: it ended ok, relayed from a channel whose attempt answered
// with a success status.
func served(rec *record.Record) bool {
	if rec.Status != record.StatusOK || rec.Channel == "" {
		return false
	}
	for _, a := range rec.Attempts {
		if a.Channel == rec.Channel && a.Status == record.StatusOK && a.HTTPStatus >= 200 && a.HTTPStatus < 300 {
			return true
		}
	}
	return false
}

// safeLabel returns s when it can be a label value, else OtherModel. Channel
// and group names come from the configuration, but the configuration is
// YAML and could hold anything; a label value Prometheus refuses would make
// the observation panic.
func safeLabel(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return OtherModel
}

// Reconfigure admits the newly configured names and sets the limit of
// run-time names (a configuration reload). Names already admitted keep
// their label: their series exist, and a label that came and went would
// split a model's history.
func (s *Models) Reconfigure(configured []string, max int) {
	if max <= 0 {
		max = DefaultMaxModels
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.max = max
	for _, m := range configured {
		if labelable(m) {
			s.known[m] = struct{}{}
		}
	}
}
