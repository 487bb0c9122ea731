package store_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/store/storetest"

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

	s, err := store.Open(storetest.Ctx(t), u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	direct, err := store.Open(storetest.Ctx(t), dsn) // the test's own view, around the proxy
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()

	opts := storetest.FastRetry
	opts.QueueSize = 200
	opts.WriteTimeout = 2 * time.Second
	w := store.NewWriter(s, opts)
	defer w.Close(context.Background())

	offered := 0
	var slowest time.Duration
	began := time.Now()
	offer := func(n int) {
		for range n {
			r := storetest.FullRecord(storetest.IDN(offered), storetest.Base.Add(time.Duration(offered)*time.Millisecond))
			start := time.Now()
			w.Record(&r)
			slowest = max(slowest, time.Since(start))
			offered++
			time.Sleep(200 * time.Microsecond) // requests finishing one after another
		}
	}

	offer(20)
	storetest.WaitFor(t, "the first records to be written", func() bool { return w.Stats().Written == 20 })

	proxy.cut()
	offer(150)
	storetest.WaitFor(t, "the writer to notice the outage", func() bool { st := w.Stats(); return st.Retrying && st.FailedBatches > 0 })
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
	if n := storetest.CountAll(t, direct); n != 20 {
		t.Errorf("%d records reached the database during the outage, want 20", n)
	}

	proxy.restore()
	storetest.WaitFor(t, "the queue to drain after the outage", func() bool { return w.Stats().Queued == 0 })
	st = w.Stats()
	if st.Written != 220 || st.Dropped != 50 || st.Retrying {
		t.Errorf("after the outage: %+v", st)
	}
	accounted(t, st, offered)
	if n := storetest.CountAll(t, direct); n != 220 {
		t.Errorf("%d records in the database after the outage, want 220", n)
	}
	// Record never waits on the database: a mutex and an append, 50 ms at
	// most, plus as long as this process's timers were seen to run late
	// during the test (a call descheduled beside stress-ng took 267 ms);
	// waiting on the outage's 2 s write timeout would still show.
	if slip := testenv.Slip(time.Since(began) + time.Second); slowest > 50*time.Millisecond+2*slip {
		t.Errorf("the slowest Record call took %v (timers ran up to %v late meanwhile)", slowest, slip)
	}
}

// TestErrorMessageHidesTheDatabase: what /api/health shows of a failing
// PostgreSQL — the writer's last_error and the ping error — names neither
// its address, host name, user, database nor password.
func TestErrorMessageHidesTheDatabase(t *testing.T) {
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
	_, proxyPort, _ := net.SplitHostPort(proxy.ln.Addr().String())
	user := u.User.Username()
	password, _ := u.User.Password()
	database := strings.TrimPrefix(u.Path, "/")
	secrets := []string{"user=", "database=", "127.0.0.1", "localhost", "::1", proxyPort, port, `"` + user + `"`, `"` + database + `"`}
	check := func(what, msg string, extra ...string) {
		t.Helper()
		if msg == "" {
			t.Errorf("%s: no message", what)
		}
		for _, s := range append(secrets, extra...) {
			if strings.Contains(msg, s) {
				t.Errorf("%s shows %q: %s", what, s, msg)
			}
		}
		t.Logf("%s: %s", what, msg)
	}

	// The database goes away under a running writer (through localhost,
	// so that a host name is in play as well as addresses).
	via := *u
	via.Host = net.JoinHostPort("localhost", proxyPort)
	q := via.Query()
	q.Set("connect_timeout", "2")
	via.RawQuery = q.Encode()
	s, err := store.Open(storetest.Ctx(t), via.String())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w := store.NewWriter(s, storetest.FastRetry)
	defer func() {
		// The database stays away: give up on the queued record.
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		w.Close(ctx)
	}()
	proxy.cut()
	w.Record(new(storetest.FullRecord("req-1", storetest.Base)))
	storetest.WaitFor(t, "a failed connection", func() bool { return strings.Contains(w.Stats().LastError, "failed to connect") })
	raw := s.Ping(storetest.Ctx(t))
	if raw == nil || !strings.Contains(raw.Error(), proxyPort) {
		t.Fatalf("the raw ping error should name the address (else this test shows nothing): %v", raw)
	}
	check("last_error", w.Stats().LastError)
	check("ping", store.ErrorMessage(raw))

	// What the writer and a ping meet when a connection cannot be made.
	connectErr := func(dsn string) error {
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		ctx, cancel := context.WithTimeout(storetest.Ctx(t), 10*time.Second)
		defer cancel()
		err = db.PingContext(ctx)
		if err == nil {
			t.Fatalf("%s: connected", store.RedactDSN(dsn))
		}
		return err
	}

	// A wrong password: the server's answer quotes the user.
	bad := *u
	bad.User = url.UserPassword(user, "wrong-password-123")
	bad.Host = net.JoinHostPort("localhost", port)
	if password != user && len(password) >= 4 {
		secrets = append(secrets, password)
	}
	check("wrong password", store.ErrorMessage(connectErr(bad.String())), "wrong-password-123")

	// A host that does not resolve.
	check("unresolvable host", store.ErrorMessage(connectErr("postgres://someone:secret-pw@no-such-host.invalid:5432/somedb?sslmode=disable&connect_timeout=2")),
		"no-such-host", "someone", "secret-pw", "somedb")
}

func TestErrorMessageAddresses(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"dial tcp [fd00::5]:5432: connect: connection refused", "dial tcp [address]: connect: connection refused"},
		{"read tcp 10.0.0.1:55123->10.0.0.2:5432: read: connection reset by peer", "read tcp [address]->[address]: read: connection reset by peer"},
		{"lookup db.internal on 10.0.0.2:53: no such host", "lookup db.internal on [address]: no such host"},
		// What is not an address stays as it is.
		{"store: invalid record: request req-1 has timestamp 1969-01-01 09:26:53 +0000 UTC outside 1970..2261",
			"store: invalid record: request req-1 has timestamp 1969-01-01 09:26:53 +0000 UTC outside 1970..2261"},
		{"insert requests: database or disk is full (13)", "insert requests: database or disk is full (13)"},
	} {
		if got := store.ErrorMessage(errors.New(c.in)); got != c.want {
			t.Errorf("store.ErrorMessage(%q)\n got %q\nwant %q", c.in, got, c.want)
		}
	}
	if store.ErrorMessage(nil) != "" {
		t.Error("store.ErrorMessage(nil) is not empty")
	}
}

// TestRedactDSN: only the password of a DSN is hidden, found by parsing
// it; the host, port, user and database name stay for the operator, even
// when one of them contains the password's text.
func TestRedactDSN(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"postgres://root:bars@127.0.0.1:5439/ttfx_bars", "postgres://root:xxxxx@127.0.0.1:5439/ttfx_bars"},
		{"postgresql://u:p%40ss@db.internal:5432/ttfx?sslmode=disable", "postgresql://u:xxxxx@db.internal:5432/ttfx?sslmode=disable"},
		{"postgres://u@h:5432/db?password=secret&sslmode=require", "postgres://u@h:5432/db?password=xxxxx&sslmode=require"},
		{"postgres://h:5432/db", "postgres://h:5432/db"},
		{"clickhouse://default:chpw@127.0.0.1:9000/ttfx", "clickhouse://default:xxxxx@127.0.0.1:9000/ttfx"},
		// Not a valid URL (an unescaped space): cut at the last @.
		{"postgres://u:p w@h/db", "postgres://u:xxxxx@h/db"},
		{"sqlite:ttfx.db", "sqlite:ttfx.db"},
	} {
		if got := store.RedactDSN(c.in); got != c.want {
			t.Errorf("store.RedactDSN(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	// What an API reader sees of the same error names none of it.
	err := fmt.Errorf("open store %s: dial error", store.RedactDSN("postgres://root:bars@127.0.0.1:5439/ttfx_bars"))
	if got := store.ErrorMessage(err); got != "open store [store]: dial error" {
		t.Errorf("ErrorMessage = %q", got)
	}
}

// TestOpenMessages: an unreachable database and a refused password each
// say what is wrong and what happens next, and name the host and port with
// only the password hidden.
func TestOpenMessages(t *testing.T) {
	// Unreachable: a port nothing listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	s, err := store.OpenOrRetry(storetest.Ctx(t), "postgres://root:pw4321@"+addr+"/ttfx_pw4321?sslmode=disable&connect_timeout=2", log)
	if err != nil {
		t.Fatalf("unreachable: %v, want a store that retries", err)
	}
	s.Close()
	for _, want := range []string{"cannot reach the database at postgres://root:xxxxx@" + addr + "/ttfx_pw4321", "serves anyway", "retries in the background", addr} {
		if !strings.Contains(logged.String(), want) {
			t.Errorf("unreachable: log %q lacks %q", logged.String(), want)
		}
	}
	if strings.Contains(logged.String(), "root:pw4321") {
		t.Errorf("unreachable: log shows the password: %s", logged.String())
	}

	// Refused: the real server with a wrong password.
	u, err := url.Parse(testenv.PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), "wrong-pw-98765")
	_, err = store.OpenOrRetry(storetest.Ctx(t), u.String(), log)
	if err == nil {
		t.Fatal("a wrong password opened the store")
	}
	msg := err.Error()
	for _, want := range []string{u.Host, ":xxxxx@", "refused", "does not start", "correct the DSN"} {
		if !strings.Contains(msg, want) {
			t.Errorf("wrong password: %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "wrong-pw-98765") {
		t.Errorf("wrong password: the message shows it: %s", msg)
	}
}
