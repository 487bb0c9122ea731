//go:build unix

package relay

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
)

// readFirst reads a connection's first bytes through its raw descriptor, to
// learn what a plain Read hides: whether they were already there (waited
// false) or the read had to wait for them. ok is false when c has no
// descriptor; the caller then reads it as usual.
func readFirst(c net.Conn, p []byte) (n int, waited, ok bool, err error) {
	sc, isSys := c.(syscall.Conn)
	if !isSys || len(p) == 0 {
		return 0, false, false, nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0, false, false, nil
	}
	var rerr error
	err = rc.Read(func(fd uintptr) bool {
		for {
			n, rerr = syscall.Read(int(fd), p)
			if rerr != syscall.EINTR {
				break
			}
		}
		if rerr == syscall.EAGAIN {
			waited = true
			return false // wait until readable, then call again
		}
		return true
	})
	if n < 0 {
		n = 0
	}
	switch {
	case err != nil:
		// A deadline, or the connection closed under the read: the
		// error net/http expects from a Read ("raw-read" becomes "read").
		var oe *net.OpError
		if errors.As(err, &oe) {
			e := *oe
			e.Op = "read"
			err = &e
		}
	case rerr != nil:
		err = &net.OpError{Op: "read", Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: os.NewSyscallError("read", rerr)}
	case n == 0:
		err = io.EOF
	}
	return n, waited, true, err
}
