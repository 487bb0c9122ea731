//go:build !linux

package relay_test

import "net"

func tcpState(net.Conn) (uint8, bool) { return 0, false }

const tcpEstablished = 1
