//go:build pprof

package main

import (
	"net/http"
	_ "net/http/pprof"
	"os"
)

// Built with -tags pprof, ttfx serves net/http/pprof on TTFX_PPROF
// (e.g. 127.0.0.1:6060), for profiling the relay under load (issue 15).
func init() {
	if addr := os.Getenv("TTFX_PPROF"); addr != "" {
		go http.ListenAndServe(addr, nil)
	}
}
