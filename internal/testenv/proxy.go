package testenv

import (
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy is a TCP proxy in front of a server that a test can cut (open
// connections reset, new ones refused: the server is down) or freeze (open
// and new connections accepted but no byte forwarded: the server hangs, as
// a stopped process or a partitioned network does). That is what a database
// outage looks like from the gateway, without touching a server other tests
// share.
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex // guards state and conns; cond waits on it
	cond   *sync.Cond
	state  proxyState
	conns  map[net.Conn]bool
	closed bool
	wg     sync.WaitGroup
}

type proxyState uint8

const (
	proxyUp proxyState = iota
	proxyCut
	proxyFrozen
)

// NewProxy starts a proxy to target (host:port), up, closed when t ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.close)
	return p
}

// Addr is the proxy's address (host:port).
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut resets every open connection and refuses new ones.
func (p *Proxy) Cut() { p.set(proxyCut) }

// Freeze stops forwarding: connections stay open, bytes wait.
func (p *Proxy) Freeze() { p.set(proxyFrozen) }

// Restore forwards again (connections cut before stay closed).
func (p *Proxy) Restore() { p.set(proxyUp) }

func (p *Proxy) set(s proxyState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.state = s
	if s == proxyCut {
		for c := range p.conns {
			c.Close()
		}
		clear(p.conns)
	}
	p.cond.Broadcast()
}

func (p *Proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.set(proxyCut)
	p.wg.Wait()
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.state == proxyCut || p.closed {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c] = true
		p.mu.Unlock()
		p.wg.Add(1)
		go p.connect(c)
	}
}

// connect dials the target once the proxy is not frozen, then pipes.
func (p *Proxy) connect(c net.Conn) {
	defer p.wg.Done()
	if !p.wait() {
		c.Close()
		return
	}
	up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if !p.conns[c] {
		p.mu.Unlock()
		up.Close()
		return // cut meanwhile
	}
	p.conns[up] = true
	p.mu.Unlock()
	p.wg.Add(2)
	go p.pipe(c, up)
	go p.pipe(up, c)
}

// wait blocks while the proxy is frozen; false means cut or closed.
func (p *Proxy) wait() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.state == proxyFrozen {
		p.cond.Wait()
	}
	return p.state == proxyUp
}

func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.wait() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
