package server

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/ttfx/ttfx/internal/config"
)

// certCheckEvery is how often a handshake looks whether the certificate
// files changed: a renewal is served within it, and a busy listener stats
// the files at most once in it.
const certCheckEvery = time.Second

// certFiles serves the listener's certificate and reloads it when its
// files change (certificate rotation: certbot, cert-manager and the like
// replace the files in place). A renewal that does not load (a key that
// does not match, a file caught half written) keeps the certificate being
// served, logs why, and is tried again at the next change.
type certFiles struct {
	cert, key string
	log       *slog.Logger
	now       func() time.Time

	mu      sync.Mutex // guards the fields below
	current *tls.Certificate
	stamp   string    // the files' sizes and modification times when current was loaded or last failed
	checked time.Time // when the files were last looked at
}

func newCertFiles(c config.TLS, log *slog.Logger) (*certFiles, error) {
	f := &certFiles{cert: c.CertFile, key: c.KeyFile, log: log, now: time.Now}
	stamp, err := f.stamp0()
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(f.cert, f.key)
	if err != nil {
		return nil, fmt.Errorf("tls: load cert_file %s and key_file %s: %w", f.cert, f.key, err)
	}
	f.current, f.stamp, f.checked = &cert, stamp, f.now()
	return f, nil
}

// stamp0 describes both files so that a change to either shows.
func (f *certFiles) stamp0() (string, error) {
	var s string
	for _, p := range []string{f.cert, f.key} {
		fi, err := os.Stat(p)
		if err != nil {
			return "", fmt.Errorf("tls: %w", err)
		}
		s += fmt.Sprintf("%d@%d;", fi.Size(), fi.ModTime().UnixNano())
	}
	return s, nil
}

// config is the listener's TLS configuration: HTTP/2 first, then HTTP/1.1.
func (f *certFiles) config() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		NextProtos:     []string{"h2", "http/1.1"},
		GetCertificate: f.get,
	}
}

// get is tls.Config.GetCertificate.
func (f *certFiles) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if now := f.now(); now.Sub(f.checked) >= certCheckEvery {
		f.checked = now
		f.reloadLocked()
	}
	return f.current, nil
}

func (f *certFiles) reloadLocked() {
	stamp, err := f.stamp0()
	if err != nil {
		if f.stamp != "" {
			f.log.Warn("tls: cannot read the certificate files; serving the certificate loaded before", "err", err)
		}
		f.stamp = ""
		return
	}
	if stamp == f.stamp {
		return
	}
	f.stamp = stamp
	cert, err := tls.LoadX509KeyPair(f.cert, f.key)
	if err != nil {
		f.log.Warn("tls: the certificate files changed but do not load; serving the certificate loaded before until they change again",
			"cert_file", f.cert, "key_file", f.key, "err", err)
		return
	}
	f.current = &cert
	f.log.Info("tls: certificate reloaded", "cert_file", f.cert, "not_after", leafNotAfter(&cert))
}

func leafNotAfter(c *tls.Certificate) string {
	if c.Leaf == nil {
		return ""
	}
	return c.Leaf.NotAfter.UTC().Format(time.RFC3339)
}
