package store

import (
	"context"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/testenv"
)

// cutProxy is a TCP proxy between the store and PostgreSQL that can be cut:
// that is what a database outage looks like from the gateway (connections
// reset, new ones refused), without stopping a server other tests share.
type cutProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex // guards up and conns
	up    bool
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target, up: true, conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.cut()
		p.wg.Wait()
	})
	return p
}

func (p *cutProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if !p.up {
			p.mu.Unlock()
			c.Close() // the server is "down": the connection dies at once
			continue
		}
		up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c], p.conns[up] = true, true
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

func (p *cutProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	io.Copy(dst, src)
	dst.Close()
	src.Close()
}

// cut resets every open connection and refuses new ones.
func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.up = false
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

func (p *cutProxy) restore() {
	p.mu.Lock()
	p.up = true
	p.mu.Unlock()
}

// TestPostgresOutage cuts PostgreSQL away while records are being written:
// Record keeps returning at once, records are queued and counted, the ones
// past the queue's bound are counted as dropped, and once the database is
// back every queued record is written.
func TestPostgresOutage(t *testing.T) {
	dsn := testenv.PostgresSchema(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	port := u.Port()
	if port == "" {
		port = "5432"
	}
	proxy := newCutProxy(t, net.JoinHostPort(u.Hostname(), port))
	u.Host = proxy.ln.Addr().String()
	q := u.Query()
	q.Set("connect_timeout", "2")
	u.RawQuery = q.Encode()

	s, err := Open(ctxT(t), u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	direct, err := Open(ctxT(t), dsn) // the test's own view, around the proxy
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()

	opts := fastRetry
	opts.QueueSize = 200
	opts.WriteTimeout = 2 * time.Second
	w := NewWriter(s, opts)
	defer w.Close(context.Background())

	offered := 0
	var slowest time.Duration
	offer := func(n int) {
		for range n {
			r := fullRecord(idN(offered), testBase.Add(time.Duration(offered)*time.Millisecond))
			start := time.Now()
			w.Record(r)
			slowest = max(slowest, time.Since(start))
			offered++
			time.Sleep(200 * time.Microsecond) // requests finishing one after another
		}
	}

	offer(20)
	waitFor(t, "the first records to be written", func() bool { return w.Stats().Written == 20 })

	proxy.cut()
	offer(150)
	waitFor(t, "the writer to notice the outage", func() bool { st := w.Stats(); return st.Retrying && st.FailedBatches > 0 })
	st := w.Stats()
	if st.Written != 20 || st.Queued != 150 || st.Dropped != 0 || st.LastError == "" {
		t.Errorf("during the outage: %+v", st)
	}
	accounted(t, st, offered)
	t.Logf("last error during the outage: %s", st.LastError)

	offer(100) // 250 waiting against a bound of 200
	st = w.Stats()
	if st.Queued != 200 || st.Dropped != 50 {
		t.Errorf("past the bound: %+v", st)
	}
	accounted(t, st, offered)
	if n := countAll(t, direct); n != 20 {
		t.Errorf("%d records reached the database during the outage, want 20", n)
	}

	proxy.restore()
	waitFor(t, "the queue to drain after the outage", func() bool { return w.Stats().Queued == 0 })
	st = w.Stats()
	if st.Written != 220 || st.Dropped != 50 || st.Retrying {
		t.Errorf("after the outage: %+v", st)
	}
	accounted(t, st, offered)
	if n := countAll(t, direct); n != 220 {
		t.Errorf("%d records in the database after the outage, want 220", n)
	}
	// Record never waits on the database; a generous bound for a mutex
	// and an append on a loaded machine.
	if slowest > 50*time.Millisecond {
		t.Errorf("the slowest Record call took %v", slowest)
	}
}
