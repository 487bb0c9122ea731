package server_test

import (
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
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/ttfx/ttfx/internal/config"
	"github.com/ttfx/ttfx/internal/server"
	"github.com/ttfx/ttfx/internal/sim"
	"github.com/ttfx/ttfx/internal/testenv"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "ttfx test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue writes a certificate for 127.0.0.1 and localhost with serial and
// its key as PEM files at certFile and keyFile.
func (ca *testCA) issue(t *testing.T, serial int64, certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: "ttfx"},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	// Written aside and renamed into place, as certificate tools do, so
	// that a handshake never reads half a file.
	for path, b := range map[string][]byte{
		certFile: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyFile:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}),
	} {
		if err := os.WriteFile(path+".new", b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".new", path); err != nil {
			t.Fatal(err)
		}
	}
}

// tlsGateway starts a gateway with tls: in front of a simulator and
// returns it, the simulator, the CA and the certificate files.
func tlsGateway(t *testing.T) (srv *server.Server, up *httptest.Server, ca *testCA, certFile, keyFile string) {
	t.Helper()
	dir := t.TempDir()
	ca = newTestCA(t)
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca.issue(t, 100, certFile, keyFile)
	up = httptest.NewServer(sim.New(sim.Options{}))
	t.Cleanup(up.Close)
	y := fmt.Sprintf(`
store: %q
tls: {cert_file: %q, key_file: %q}
keys:
  - {name: ops, role: admin, key_env: ADMIN}
  - {name: team-a, role: client, group: team-a, key_env: CLIENT}
channels:
  - {name: oa, protocol: openai, base_url: %q, key_env: UPSTREAM}
  - {name: an, protocol: anthropic, base_url: %q, key_env: UPSTREAM}
`, "sqlite:"+filepath.Join(dir, "ttfx.db"), certFile, keyFile, up.URL, up.URL)
	env := map[string]string{"ADMIN": "admin-key-0123456789", "CLIENT": "client-key-0123456789", "UPSTREAM": "u"}
	cfg, err := config.Parse([]byte(y), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	srv = start(t, server.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler)})
	return srv, up, ca, certFile, keyFile
}

// trusting is an HTTP client that trusts only ca and speaks HTTP/2 when
// the server offers it, as the SDKs' default clients do.
func trusting(ca *testCA) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.pem)
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
}

// TestTLSWithSDKs: with tls: configured the gateway serves HTTPS, HTTP/2
// to clients that offer it, and the official Go SDKs stream through it
// exactly what they get from the upstream directly.
func TestTLSWithSDKs(t *testing.T) {
	srv, up, ca, _, _ := tlsGateway(t)
	if !strings.HasPrefix(srv.URL(), "https://") {
		t.Fatalf("URL %s, want https://", srv.URL())
	}
	hc := trusting(ca)
	var mu sync.Mutex
	protos := map[string]bool{}
	seen := func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		resp, err := next(req)
		if err == nil && strings.HasPrefix(req.URL.String(), srv.URL()) {
			mu.Lock()
			protos[resp.Proto] = true
			mu.Unlock()
		}
		return resp, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	chat := func(base, key string) string {
		client := openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0),
			option.WithHTTPClient(hc), option.WithMiddleware(seen))
		stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
			Model:    "fast",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello.")},
		})
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("openai-go stream via %s: %v", base, err)
		}
		stream.Close()
		if len(acc.Choices) == 0 {
			t.Fatalf("openai-go via %s: no choices", base)
		}
		return acc.Choices[0].Message.Content
	}
	if relayed, direct := chat(srv.URL(), "client-key-0123456789"), chat(up.URL, "u"); relayed == "" || relayed != direct {
		t.Errorf("openai-go over HTTPS: %q, directly %q", relayed, direct)
	}

	messages := func(base, key string) anthropic.Message {
		client := anthropic.NewClient(aoption.WithBaseURL(base), aoption.WithAPIKey(key), aoption.WithMaxRetries(0),
			aoption.WithHTTPClient(hc), aoption.WithMiddleware(seen))
		stream := client.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
			Model:     "reasoning",
			MaxTokens: 512,
			Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello."))},
		})
		var msg anthropic.Message
		for stream.Next() {
			if err := msg.Accumulate(stream.Current()); err != nil {
				t.Fatalf("accumulate: %v", err)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("anthropic-sdk-go stream via %s: %v", base, err)
		}
		return msg
	}
	relayed, direct := messages(srv.URL(), "client-key-0123456789"), messages(up.URL, "u")
	if len(relayed.Content) == 0 || len(relayed.Content) != len(direct.Content) || relayed.StopReason != direct.StopReason {
		t.Errorf("anthropic-sdk-go over HTTPS: %+v, directly %+v", relayed, direct)
	}
	for i := range min(len(relayed.Content), len(direct.Content)) {
		if relayed.Content[i].Text != direct.Content[i].Text || relayed.Content[i].Thinking != direct.Content[i].Thinking {
			t.Errorf("anthropic-sdk-go over HTTPS: block %d differs", i)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(protos) != 1 || !protos["HTTP/2.0"] {
		t.Errorf("the SDKs spoke %v to the gateway, want HTTP/2.0 only", protos)
	}

	// A client that offers only HTTP/1.1 still gets served.
	h1conf := hc.Transport.(*http.Transport).TLSClientConfig.Clone()
	h1conf.NextProtos = []string{"http/1.1"}
	h1 := &http.Client{Transport: &http.Transport{TLSClientConfig: h1conf}}
	resp, err := h1.Get(srv.URL() + "/healthz")
	if err != nil || resp.StatusCode != 200 || resp.Proto != "HTTP/1.1" {
		t.Fatalf("HTTP/1.1 over TLS: %v %v", resp, err)
	}
	resp.Body.Close()
	// Plain HTTP to the TLS port is refused, not served in the clear.
	plain, err := http.Get("http://" + srv.Addr() + "/healthz")
	if err == nil {
		defer plain.Body.Close()
		if plain.StatusCode == 200 {
			t.Errorf("plain HTTP to the TLS listener answered 200")
		}
	}
}

// TestTLSNodeSDKs: the official Node SDKs (openai, @anthropic-ai/sdk)
// stream through the gateway over HTTPS exactly what they see from the
// simulator directly, trusting the test's CA through NODE_EXTRA_CA_CERTS.
func TestTLSNodeSDKs(t *testing.T) {
	dir, _ := filepath.Abs("../../testdata/sdk-node")
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.Missing(t, "node", "Node.js 20 or later on PATH")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai")); err != nil {
		testenv.Missing(t, "the Node SDKs", "run `npm ci --prefix testdata/sdk-node`")
	}
	srv, up, ca, _, _ := tlsGateway(t)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, ca.pem, 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(base, key string) map[string]json.RawMessage {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, "stream.mjs", base, key)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "NODE_EXTRA_CA_CERTS="+caFile)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("node stream.mjs %s: %v\n%s", base, err, stderr.String())
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatalf("script output: %v\n%s", err, out)
		}
		return m
	}
	relayed, direct := run(srv.URL(), "client-key-0123456789"), run(up.URL, "u")
	for _, k := range []string{"chat", "responses", "anthropic"} {
		if len(relayed[k]) < 20 || !bytes.Equal(relayed[k], direct[k]) {
			t.Errorf("%s through the gateway over HTTPS:\n%s\ndirectly:\n%s", k, relayed[k], direct[k])
		}
	}
	if string(relayed["wrongKey"]) != "401" {
		t.Errorf("a wrong key over HTTPS: %s, want the SDK's 401 error", relayed["wrongKey"])
	}
}

// TestTLSRotation: replacing the certificate files (as a renewal does)
// changes the certificate new connections get, without a restart; files
// that do not load keep the one being served.
func TestTLSRotation(t *testing.T) {
	srv, _, ca, certFile, keyFile := tlsGateway(t)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.pem)
	served := func() int64 {
		t.Helper()
		c, err := tls.Dial("tcp", srv.Addr(), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
		if err != nil {
			t.Fatalf("handshake: %v", err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
	}
	// until asks for the certificate until it has serial want; the files
	// are looked at once a second.
	until := func(want int64) {
		t.Helper()
		var got int64
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if got = served(); got == want {
				return
			}
		}
		t.Fatalf("serving certificate %d, want %d after the files changed", got, want)
	}
	if got := served(); got != 100 {
		t.Fatalf("serving certificate %d, want 100", got)
	}
	ca.issue(t, 101, certFile, keyFile)
	until(101)

	// A key that does not match the certificate: the renewal is refused
	// and 101 stays.
	ca.issue(t, 102, certFile, keyFile+".other")
	time.Sleep(1500 * time.Millisecond)
	if got := served(); got != 101 {
		t.Fatalf("serving certificate %d after a mismatched renewal, want 101 kept", got)
	}
	// The matching key arrives: 102 is served.
	if err := os.Rename(keyFile+".other", keyFile); err != nil {
		t.Fatal(err)
	}
	until(102)
}

// TestTLSBadFiles: a gateway whose certificate does not load does not
// start, and says which files and why.
func TestTLSBadFiles(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca := newTestCA(t)
	ca.issue(t, 1, certFile, keyFile)
	other := filepath.Join(dir, "other.key")
	ca.issue(t, 2, filepath.Join(dir, "other.crt"), other)
	for _, c := range []struct {
		name, cert, key, want string
	}{
		{"missing", filepath.Join(dir, "none.crt"), keyFile, "none.crt: no such file"},
		{"mismatched key", certFile, other, "private key does not match public key"},
	} {
		t.Run(c.name, func(t *testing.T) {
			y := fmt.Sprintf("store: %q\ntls: {cert_file: %q, key_file: %q}\n", "sqlite:"+filepath.Join(t.TempDir(), "ttfx.db"), c.cert, c.key)
			cfg, err := config.Parse([]byte(y), func(string) string { return "" })
			if err != nil {
				t.Fatal(err)
			}
			_, err = server.New(context.Background(), server.Options{Config: cfg, Listen: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler)})
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "tls") {
				t.Errorf("start with %s: %v, want an error naming tls and %q", c.name, err, c.want)
			}
		})
	}
	if _, err := config.Parse([]byte("tls: {cert_file: a.crt}\n"), func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "key_file") {
		t.Errorf("tls without key_file: %v, want an error naming key_file", err)
	}
}

// TestListenBusy: a port another program holds is said so, with the flag
// that picks another.
func TestListenBusy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = server.New(context.Background(), server.Options{Dir: t.TempDir(), Listen: ln.Addr().String(), Logger: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), "address already in use") || !strings.Contains(err.Error(), "--listen") ||
		!strings.Contains(err.Error(), ln.Addr().String()) {
		t.Errorf("start on a busy port: %v, want the address and a hint of --listen", err)
	}
}
