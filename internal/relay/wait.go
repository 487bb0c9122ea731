package relay

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// The part of a request's wait its timeline cannot see from t0 on: the time
// between the request's first byte read on its connection and the handler
// starting (accepting, reading the headers, waiting for a core). It is what
// grows first when the gateway is overloaded, so it is recorded as the local
// phase request_wait_ms (issue 15).
//
// A connection's first request starts when the connection is accepted if
// its bytes were already waiting when the connection was first read; if
// that read had to wait for them (a client that opened the connection
// early and sent later, as browsers and warmed-up pools do), it starts when
// they arrived. A later request on a kept-alive connection starts with the
// first Read that returns its bytes.
// net/http reports StateActive only once the headers are read and StateIdle
// once a response is done, so the connection arms itself for the next
// request's first byte at StateIdle, and the relay arms it again once it has
// read a request's body: a client that sends its next request early has it
// read by net/http's background read while the handler still runs.

// TimeConns makes srv record, for each HTTP/1 connection accepted on ln,
// when each request's first byte was read, for request_wait_ms. It sets
// srv.ConnContext and srv.ConnState (keeping ones already set) and returns
// the listener to serve on.
func TimeConns(srv *http.Server, ln net.Listener) net.Listener {
	prevCtx, prevState := srv.ConnContext, srv.ConnState
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if prevCtx != nil {
			ctx = prevCtx(ctx, c)
		}
		if tc, ok := c.(*timedConn); ok {
			ctx = context.WithValue(ctx, timedConnKey{}, tc)
		}
		return ctx
	}
	srv.ConnState = func(c net.Conn, st http.ConnState) {
		if tc, ok := c.(*timedConn); ok {
			switch st {
			case http.StateActive:
				tc.begin()
			case http.StateIdle:
				tc.arm()
			}
		}
		if prevState != nil {
			prevState(c, st)
		}
	}
	return &timedListener{Listener: ln}
}

// timedListener stamps each accepted connection.
type timedListener struct{ net.Listener }

func (l *timedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &timedConn{Conn: c, first: true}
	tc.next.Store(stamp(time.Now()))
	return tc, nil
}

// connEpoch is the origin of the stamps: a time.Time with Go's monotonic
// reading, so that a stamp turned back into a time (epoch + offset) still
// subtracts monotonically from t0.
var connEpoch = time.Now()

// stamp returns t as a non-zero offset from connEpoch (0 means unset).
func stamp(t time.Time) int64 { return int64(t.Sub(connEpoch)) + 1 }

// timedConn is a connection that notes when a request's first byte was read.
// Its atomics are written by the connection's goroutine and by net/http's
// background read, and read by the handler.
type timedConn struct {
	net.Conn
	first bool         // no Read yet (only the connection's goroutine reads it)
	armed atomic.Bool  // the next Read with bytes starts a request
	next  atomic.Int64 // stamp of the next request's first byte; 0: not seen
	cur   atomic.Int64 // stamp of the current request's first byte; 0: unknown
}

func (c *timedConn) Read(p []byte) (int, error) {
	if c.first {
		c.first = false
		if n, waited, ok, err := readFirst(c.Conn, p); ok {
			if waited && n > 0 {
				// Opened before its request was sent: the request
				// starts now, not at accept.
				c.next.Store(stamp(time.Now()))
			}
			return n, err
		}
	}
	n, err := c.Conn.Read(p)
	if n > 0 && c.armed.Load() && c.armed.CompareAndSwap(true, false) {
		c.next.Store(stamp(time.Now()))
	}
	return n, err
}

// CloseWrite keeps net/http's half-close of a TCP connection (it looks for
// the method on the connection it serves).
func (c *timedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// begin makes the first byte seen since the last request this request's.
// Until the request is read, bytes read are its own (its body), not the
// next request's.
func (c *timedConn) begin() {
	c.armed.Store(false)
	c.cur.Store(c.next.Swap(0))
}

// arm waits for the next request's first byte, unless it was read already.
func (c *timedConn) arm() {
	if c.next.Load() == 0 {
		c.armed.Store(true)
	}
}

type timedConnKey struct{}

// requestStart returns when r's first byte was read on its connection, and
// whether that is known (the server used TimeConns, and the byte was seen).
func requestStart(r *http.Request) (*timedConn, time.Time, bool) {
	tc, _ := r.Context().Value(timedConnKey{}).(*timedConn)
	if tc == nil {
		return nil, time.Time{}, false
	}
	s := tc.cur.Load()
	if s == 0 {
		return tc, time.Time{}, false
	}
	return tc, connEpoch.Add(time.Duration(s - 1)), true
}
