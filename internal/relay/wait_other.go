//go:build !unix

package relay

import "net"

// readFirst cannot tell here whether a connection's first bytes were
// waiting: the connection is read as usual, and its first request is timed
// from accept.
func readFirst(net.Conn, []byte) (n int, waited, ok bool, err error) {
	return 0, false, false, nil
}
