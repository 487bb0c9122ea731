package relay

import (
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ttfx/ttfx/internal/record"
)

// DefaultMaxAuthFailures is how many failed authentications one source may
// make in a minute before its further failures are answered 429.
const DefaultMaxAuthFailures = 30

// recordedFailures is how many failures of one source and minute are
// recorded in full; the rest are counted, and the source's next record
// says how many. A few rather than one, so that someone fixing a client
// sees each of their first attempts.
const recordedFailures = 5

// DefaultAuthFailureRecords is how many failed authentications are
// recorded (and so logged) in a minute over every source together. Per
// source only the first recordedFailures are, but a flood from 2,000
// addresses with 6 requests each still wrote 10,000 records and 3.7 MB of
// log (issue 50); past this bound the failures are counted
// (ttfx_auth_failures_unrecorded_total) and not written.
const DefaultAuthFailureRecords = 100

// maxFailSources bounds the sources tracked at once. Past it, failures from
// new sources share one entry, so a flood from many addresses is limited as
// one source rather than growing the table.
const maxFailSources = 1 << 14

// authFailures keeps failed authentication visible without letting a flood
// of bad keys become a flood of records and log lines: 52 k bogus requests in
// 10 s once became 51 k records and 19 MB of log. Per source (the client's
// address; an IPv6 /64) and minute, the first few failures are recorded in
// full (recordedFailures); the others are counted, and the source's next record says how many there
// were. Past max failures in its minute a source is answered 429. A valid
// key is never refused: the limit is on failing, so a shared address (NAT)
// with one misconfigured client does not lock the others out.
type authFailures struct {
	max        int
	maxRecords int           // records a minute over every source
	total      atomic.Uint64 // every failed authentication
	unrecorded atomic.Uint64 // failures not recorded: past their source's few or the global bound
	// mu guards sources, pruned and the global minute.
	mu       sync.Mutex
	sources  map[string]*failWindow
	pruned   int64 // the Unix minute of the last prune: one walk of a full table a minute
	minute   int64 // the Unix minute recorded counts
	recorded int   // failures recorded in minute, over every source
}

// failWindow is one source's failures in its current minute.
type failWindow struct {
	minute     int64 // Unix minute
	count      int   // failures in minute
	unrecorded int   // failures not recorded since the source's last record
}

func newAuthFailures(max, maxRecords int) *authFailures {
	if max <= 0 {
		max = DefaultMaxAuthFailures
	}
	if maxRecords <= 0 {
		maxRecords = DefaultAuthFailureRecords
	}
	return &authFailures{max: max, maxRecords: maxRecords, sources: map[string]*failWindow{}}
}

// failVerdict is what to do with one failed authentication.
type failVerdict struct {
	record     bool          // record it (one of the first of its source and minute)
	unrecorded int           // failures of the source not recorded before this one
	limited    bool          // answer 429
	retryAfter time.Duration // until the source's minute ends
}

// fail notes a failed authentication from source at now.
func (a *authFailures) fail(source string, now time.Time) failVerdict {
	a.total.Add(1)
	minute := now.Unix() / 60
	a.mu.Lock()
	defer a.mu.Unlock()
	w := a.sources[source]
	if w == nil {
		if len(a.sources) >= maxFailSources && a.pruned != minute {
			a.pruned = minute
			a.prune(minute)
		}
		if len(a.sources) >= maxFailSources {
			source = "*"
			w = a.sources[source]
		}
		if w == nil {
			w = &failWindow{minute: minute}
			a.sources[source] = w
		}
	}
	if w.minute != minute {
		w.minute, w.count = minute, 0
	}
	w.count++
	v := failVerdict{limited: w.count > a.max, retryAfter: time.Unix((minute+1)*60, 0).Sub(now)}
	if a.minute != minute {
		a.minute, a.recorded = minute, 0
	}
	if w.count <= recordedFailures && a.recorded < a.maxRecords {
		a.recorded++
		v.record, v.unrecorded = true, w.unrecorded
		w.unrecorded = 0
	} else {
		w.unrecorded++
		a.unrecorded.Add(1)
	}
	return v
}

// prune forgets sources whose minute is over and whose failures were all
// recorded. Those with unrecorded failures stay so that their next record
// can count them; when the table is full of them, they go too.
func (a *authFailures) prune(minute int64) {
	for s, w := range a.sources {
		if w.minute < minute && w.unrecorded == 0 {
			delete(a.sources, s)
		}
	}
	if len(a.sources) >= maxFailSources {
		for s, w := range a.sources {
			if w.minute < minute {
				delete(a.sources, s)
			}
		}
	}
}

// failSource is the source a failed authentication is counted against: the
// peer's address, not a header a client can set (X-Forwarded-For would let
// a flood pick a new source per request). IPv6 clients get a /64 each.
func failSource(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return host
	}
	if ip.To4() == nil {
		return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
	}
	return ip.String()
}

// AuthFailures returns how many requests failed authentication since the
// gateway started, recorded or not.
func (g *Gateway) AuthFailures() uint64 { return g.fails.total.Load() }

// AuthFailuresUnrecorded returns how many of AuthFailures were counted but
// not recorded nor logged: past the first few of their source and minute,
// or past the bound on records a minute over every source.
func (g *Gateway) AuthFailuresUnrecorded() uint64 { return g.fails.unrecorded.Load() }

// authFailed decides what a failed authentication costs: msg is the 401's
// message. Only the first few failures of its source and minute are
// recorded (and so logged); past the limit the source is answered 429.
func (x *exchange) authFailed(msg string) *HTTPError {
	v := x.g.fails.fail(failSource(x.r), x.tl.Start())
	x.skipRecord = !v.record
	if v.unrecorded > 0 {
		x.errorNote = "; " + strconv.Itoa(v.unrecorded) + " further failed attempts from this source were counted but not recorded since its last record"
	}
	if v.limited {
		secs := int(v.retryAfter.Seconds()) + 1
		x.w.Header().Set("Retry-After", strconv.Itoa(secs))
		return &HTTPError{Code: http.StatusTooManyRequests, Status: record.StatusAuthFailed,
			Msg: "too many failed authentication attempts from this address (more than " + strconv.Itoa(x.g.fails.max) +
				" a minute); retry in " + strconv.Itoa(secs) + " s with a valid key"}
	}
	return &HTTPError{Code: http.StatusUnauthorized, Type: "authentication_error", Msg: msg, Status: record.StatusAuthFailed}
}
