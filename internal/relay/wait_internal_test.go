//go:build unix

package relay

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// TestReadFirst: the raw first read returns what a plain Read would (bytes,
// io.EOF, a timeout net/http recognises) and says whether it had to wait.
func TestReadFirst(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	pair := func() (client, server net.Conn) {
		t.Helper()
		client, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		server, err = ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { client.Close(); server.Close() })
		return client, server
	}
	buf := make([]byte, 64)

	c, s := pair()
	c.Write([]byte("GET / HTTP/1.1\r\n"))
	time.Sleep(50 * time.Millisecond) // in the server's socket before the read
	n, waited, ok, err := readFirst(s, buf)
	if !ok || err != nil || string(buf[:n]) != "GET / HTTP/1.1\r\n" || waited {
		t.Errorf("bytes already there: %q waited %v ok %v err %v", buf[:n], waited, ok, err)
	}

	c, s = pair()
	time.AfterFunc(100*time.Millisecond, func() { c.Write([]byte("POST")) })
	start := time.Now()
	n, waited, ok, err = readFirst(s, buf)
	if !ok || err != nil || string(buf[:n]) != "POST" || !waited {
		t.Errorf("bytes sent later: %q waited %v ok %v err %v", buf[:n], waited, ok, err)
	}
	if d := time.Since(start); d < 90*time.Millisecond {
		t.Errorf("returned after %v, before the bytes were sent", d)
	}

	c, s = pair()
	c.Close()
	if n, _, ok, err = readFirst(s, buf); !ok || n != 0 || err != io.EOF {
		t.Errorf("closed by the client: n %d ok %v err %v, want io.EOF", n, ok, err)
	}

	_, s = pair()
	s.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	_, _, ok, err = readFirst(s, buf)
	var oe *net.OpError
	if !ok || !errors.As(err, &oe) || oe.Op != "read" || !oe.Timeout() {
		t.Errorf("deadline: ok %v err %v, want a read timeout", ok, err)
	}
}
