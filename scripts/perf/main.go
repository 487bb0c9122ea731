// perfkit measures what a streaming proxy adds, side by side: a mock upstream that streams
// OpenAI-style chunks at a fixed pace, a bare Go reverse proxy (the floor), and a load client
// that timestamps every event as it is read.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		log.Fatal("usage: perfkit mock|bare|load ...")
	}
	switch os.Args[1] {
	case "mock":
		mock(os.Args[2:])
	case "bare":
		bare(os.Args[2:])
	case "load":
		load(os.Args[2:])
	default:
		log.Fatalf("unknown command %q", os.Args[1])
	}
}

// mock streams: a role chunk at once, then N 16-byte content deltas every gap, then [DONE]
// (N from --events, or from the request's ?events=N).
func mock(args []string) {
	fs := flag.NewFlagSet("mock", flag.ExitOnError)
	addr := fs.String("listen", "127.0.0.1:9101", "")
	n := fs.Int("events", 64, "content events per stream")
	gap := fs.Duration("gap", 20*time.Millisecond, "pace between events")
	firstAfter := fs.Duration("first-after", 0, "delay between the headers and the first event (0: sent together)")
	holdGap := fs.Duration("hold-gap", time.Second, "pace between events of a request with ?hold (streams held open)")
	certOut := fs.String("tls-cert", "", "serve HTTPS (HTTP/2 where the client offers it, as providers do) with a new self-signed certificate for 127.0.0.1, written to this file as PEM for clients to trust (SSL_CERT_FILE)")
	fs.Parse(args)
	role := []byte(`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n")
	delta := []byte(`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"tok tok tok tok "},"finish_reason":null}]}` + "\n\n")
	fin := func(n int) []byte {
		return []byte(`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":` + fmt.Sprint(n*4) + `,"total_tokens":` + fmt.Sprint(n*4+5) + `}}` + "\n\ndata: [DONE]\n\n")
	}
	h := func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			w.WriteHeader(200)
			return
		}
		io.Copy(io.Discard, r.Body)
		pace, events := *gap, *n
		if r.URL.Query().Has("hold") {
			pace = *holdGap
		}
		// ?events=N: this stream's length (the harness's one-stream arm
		// takes many short streams, for percentiles of more samples).
		if v, err := strconv.Atoi(r.URL.Query().Get("events")); err == nil && v >= 1 && v <= 100000 {
			events = v
		}
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		w.WriteHeader(200)
		if *firstAfter > 0 {
			// Headers first, as a provider sends them before its model
			// has produced anything: a proxy that holds them shows here.
			rc.Flush()
			time.Sleep(*firstAfter)
		}
		w.Write(role)
		rc.Flush()
		start := time.Now()
		for i := 1; i <= events; i++ {
			time.Sleep(time.Until(start.Add(time.Duration(i) * pace)))
			if _, err := w.Write(delta); err != nil {
				return
			}
			rc.Flush()
		}
		w.Write(fin(events))
		rc.Flush()
	}
	if *certOut == "" {
		log.Fatal(http.ListenAndServe(*addr, http.HandlerFunc(h)))
	}
	cert, err := selfSigned(*certOut)
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Addr: *addr, Handler: http.HandlerFunc(h), TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}}
	log.Fatal(srv.ListenAndServeTLS("", ""))
}

// selfSigned makes a certificate for 127.0.0.1 and writes it to path as PEM.
func selfSigned(path string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "perfkit mock"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// bare is the floor: the standard library's reverse proxy, flushing at once.
func bare(args []string) {
	fs := flag.NewFlagSet("bare", flag.ExitOnError)
	addr := fs.String("listen", "127.0.0.1:9102", "")
	up := fs.String("upstream", "http://127.0.0.1:9101", "")
	fs.Parse(args)
	u, _ := url.Parse(*up)
	p := httputil.NewSingleHostReverseProxy(u)
	p.FlushInterval = -1
	p.Transport = &http.Transport{MaxIdleConnsPerHost: 4096, DisableCompression: true}
	log.Fatal(http.ListenAndServe(*addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			w.WriteHeader(200)
			return
		}
		p.ServeHTTP(w, r)
	})))
}

type result struct {
	headers, first time.Duration
	gaps           []time.Duration
	events         int
	err            string
	// opening: one of the first c streams, each on a connection the
	// burst opens; the later ones reuse a kept-alive connection.
	opening bool
}

// load opens streams with fixed concurrency and timestamps each event as it is read.
func load(args []string) {
	fs := flag.NewFlagSet("load", flag.ExitOnError)
	target := fs.String("url", "http://127.0.0.1:9101/v1/chat/completions", "")
	key := fs.String("key", "k", "")
	conc := fs.Int("c", 1, "concurrent streams")
	total := fs.Int("n", 20, "streams in all")
	label := fs.String("label", "", "")
	jsonOut := fs.Bool("json", false, "")
	promptBytes := fs.Int("prompt-bytes", 2, "length of the user message (a long conversation or an agent's context: tens to hundreds of KB)")
	warm := fs.Bool("warm", false, "make one untimed request first, so that an HTTP/2 target's streams share a connection already open, as a proxy's upstream streams do")
	fs.Parse(args)
	// ForceAttemptHTTP2: against an HTTPS mock (the direct arm with --tls-cert)
	// the client speaks HTTP/2, as the proxies' transports do; to a plain
	// http:// URL it changes nothing.
	tr := &http.Transport{MaxIdleConnsPerHost: *conc + 8, DisableCompression: true, ForceAttemptHTTP2: true,
		DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext}
	client := &http.Client{Transport: tr}
	body := []byte(`{"model":"perf","stream":true,"messages":[{"role":"user","content":"` + strings.Repeat("hi", max(1, *promptBytes/2)) + `"}]}`)
	if *warm {
		if r := one(client, *target, *key, body); r.err != "" {
			log.Fatalf("warm-up request: %s", r.err)
		}
	}
	var mu sync.Mutex
	var results []result
	jobs := make(chan int)
	var wg sync.WaitGroup
	wallStart := time.Now()
	for w := 0; w < *conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				r := one(client, *target, *key, body)
				r.opening = i < *conc
				mu.Lock()
				results = append(results, r)
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < *total; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	wall := time.Since(wallStart)
	var firsts, gaps, headers, opening, kept []float64
	errs, events := 0, 0
	for _, r := range results {
		if r.err != "" {
			errs++
			continue
		}
		firsts = append(firsts, ms(r.first))
		if r.opening {
			opening = append(opening, ms(r.first))
		} else {
			kept = append(kept, ms(r.first))
		}
		headers = append(headers, ms(r.headers))
		for _, g := range r.gaps {
			gaps = append(gaps, ms(g))
		}
		events += r.events
	}
	out := map[string]any{"label": *label, "streams": len(results), "errors": errs,
		"first_text_ms": pct(firsts), "gap_ms": pct(gaps), "headers_ms": pct(headers), "events_per_s": float64(events) / wall.Seconds(),
		"first_text_opening_ms": pct(opening), "first_text_kept_ms": pct(kept)}
	if *jsonOut {
		json.NewEncoder(os.Stdout).Encode(out)
		return
	}
	fmt.Printf("%-8s streams=%d errors=%d first_text p50=%.3f p99=%.3f  gap p50=%.3f p99=%.3f  events/s=%.0f\n",
		*label, len(results), errs, pct(firsts)["p50"], pct(firsts)["p99"], pct(gaps)["p50"], pct(gaps)["p99"], out["events_per_s"])
}

func one(c *http.Client, target, key string, body []byte) result {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", target, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	t0 := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return result{err: err.Error()}
	}
	defer resp.Body.Close()
	r := result{headers: time.Since(t0)}
	if resp.StatusCode != 200 {
		io.Copy(io.Discard, resp.Body)
		return result{err: resp.Status}
	}
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	var last time.Time
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 && bytes.HasPrefix(line, []byte("data: ")) && strings.Contains(string(line), `"content":"tok`) {
			now := time.Now()
			if r.first == 0 {
				r.first = now.Sub(t0)
			} else {
				r.gaps = append(r.gaps, now.Sub(last))
			}
			last = now
			r.events++
		}
		if err != nil {
			break
		}
	}
	return r
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func pct(xs []float64) map[string]float64 {
	if len(xs) == 0 {
		return map[string]float64{}
	}
	sort.Float64s(xs)
	at := func(p float64) float64 {
		pos := p * float64(len(xs)-1)
		lo := int(pos)
		if lo+1 >= len(xs) {
			return xs[lo]
		}
		return xs[lo] + (xs[lo+1]-xs[lo])*(pos-float64(lo))
	}
	return map[string]float64{"p50": at(0.5), "p90": at(0.9), "p99": at(0.99), "max": xs[len(xs)-1]}
}
