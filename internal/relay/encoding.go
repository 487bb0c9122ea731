package relay

import (
	"compress/gzip"
	"compress/zlib"
	"io"
	"net/http"
	"strings"
	"sync"
)

// The gateway asks its upstreams for no content coding (its transport sends
// no Accept-Encoding, and a client's is not forwarded), yet a misconfigured
// upstream or a proxy in front of one may compress a response all the same.
// Relayed as it came, gzip reached clients that said Accept-Encoding:
// identity (issue 50), and the relay's own reading of the response (its
// events, its usage) saw compressed bytes. So a response in gzip or
// deflate is decoded as it is read, and relayed without Content-Encoding
// or Content-Length; one in a coding the standard library cannot read
// (br, zstd, anything else) is refused as a failed attempt (502).

// unknownCodingError is roundTrip's error for a response in a coding the
// gateway cannot decode.
type unknownCodingError struct{ coding string }

func (e *unknownCodingError) Error() string {
	return "upstream response in an unknown content coding: " + e.coding
}

// decodeBody replaces resp.Body with its decoding when the upstream
// compressed it. It returns false when the coding is one the gateway
// cannot read.
func decodeBody(resp *http.Response) bool {
	ce := resp.Header.Values("Content-Encoding")
	if len(ce) == 0 {
		return true
	}
	var coding string
	for _, v := range ce {
		for c := range strings.SplitSeq(v, ",") {
			c = strings.ToLower(strings.TrimSpace(c))
			if c == "" || c == "identity" {
				continue
			}
			if coding != "" {
				return false // two codings stacked: not something a provider does
			}
			coding = c
		}
	}
	switch coding {
	case "":
	case "gzip", "x-gzip":
		resp.Body = &decodedBody{raw: resp.Body, open: func(r io.Reader) (io.ReadCloser, error) { return gzip.NewReader(r) }}
	case "deflate":
		resp.Body = &decodedBody{raw: resp.Body, open: zlib.NewReader}
	default:
		return false
	}
	resp.Header.Del("Content-Encoding")
	resp.Header.Del("Content-Length")
	resp.ContentLength = -1
	return true
}

// decodedBody decodes raw, opening the decoder at the first Read: its
// header is read from the upstream then, not while the headers are
// handled (an upstream that sends headers and then waits must not hold
// the attempt before its timers run). Close closes raw, which may happen
// while a Read waits (the transport's rule for bodies).
type decodedBody struct {
	raw  io.ReadCloser
	open func(io.Reader) (io.ReadCloser, error)

	once sync.Once
	dec  io.ReadCloser
	err  error
}

func (b *decodedBody) Read(p []byte) (int, error) {
	b.once.Do(func() { b.dec, b.err = b.open(b.raw) })
	if b.err != nil {
		if b.err == io.EOF {
			return 0, io.ErrUnexpectedEOF // not even a header: the body was cut
		}
		return 0, b.err
	}
	return b.dec.Read(p)
}

func (b *decodedBody) Close() error { return b.raw.Close() }
