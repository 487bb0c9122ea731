package testenv

import (
	"bufio"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// Redis is a redis-server of a test's own, on a free loopback port, with
// nothing persisted. Stop and Start take it away and bring it back (empty)
// on the same port.
type Redis struct {
	t    testing.TB
	bin  string
	port int
	dir  string
	cmd  *exec.Cmd
}

// StartRedis starts Debian's redis-server (from PATH) for t, stopped when t
// ends, or skips when there is none (fails under TTFX_REQUIRE_ALL=1).
func StartRedis(t testing.TB) *Redis {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		Missing(t, "redis-server", "install Debian's redis-server (scripts/ci-redis.sh)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	r := &Redis{t: t, bin: bin, port: port, dir: t.TempDir()}
	r.Start()
	t.Cleanup(r.Stop)
	return r
}

// URL is the server's redis:// URL.
func (r *Redis) URL() string { return "redis://" + r.Addr() + "/0" }

// Addr is the server's host:port.
func (r *Redis) Addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }

// Start starts the server (again) and waits until it answers PING.
func (r *Redis) Start() {
	r.t.Helper()
	if r.cmd != nil {
		return
	}
	r.cmd = exec.Command(r.bin, "--port", strconv.Itoa(r.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", r.dir, "--protected-mode", "no", "--loglevel", "warning")
	if err := r.cmd.Start(); err != nil {
		r.t.Fatalf("start redis-server: %v", err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if r.ping() {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("redis-server on port %d did not answer PING within 10 s", r.port)
		}
	}
}

// Stop kills the server and waits for it to exit.
func (r *Redis) Stop() {
	if r.cmd == nil {
		return
	}
	r.cmd.Process.Kill()
	r.cmd.Wait()
	r.cmd = nil
}

func (r *Redis) ping() bool {
	c, err := net.DialTimeout("tcp", r.Addr(), time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && line == "+PONG\r\n"
}
