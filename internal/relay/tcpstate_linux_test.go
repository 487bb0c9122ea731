package relay_test

import (
	"net"
	"syscall"
	"unsafe"
)

// tcpState returns the kernel's TCP state of conn (TCP_INFO's tcpi_state:
// 1 established, 7 closed, 8 close-wait, …).
func tcpState(conn net.Conn) (state uint8, ok bool) {
	raw, err := conn.(*net.TCPConn).SyscallConn()
	if err != nil {
		return 0, false
	}
	var info syscall.TCPInfo
	size := uint32(unsafe.Sizeof(info))
	var errno syscall.Errno
	raw.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall6(syscall.SYS_GETSOCKOPT, fd, syscall.IPPROTO_TCP, syscall.TCP_INFO,
			uintptr(unsafe.Pointer(&info)), uintptr(unsafe.Pointer(&size)), 0)
	})
	return info.State, errno == 0
}

const tcpEstablished = 1
