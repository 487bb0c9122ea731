package api

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

func TestAwaitRequest(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/api/requests/late" && calls.Add(1) < 3:
			WriteError(w, http.StatusNotFound, TypeNotFound, "no request with id")
		case r.URL.Path == "/api/requests/late":
			w.Write([]byte(`{"request_id":"late","status":"ok"}`))
		case r.URL.Path == "/api/requests/denied":
			WriteError(w, http.StatusUnauthorized, TypeAuthentication, "no key")
		default:
			WriteError(w, http.StatusNotFound, TypeNotFound, "no request with id")
		}
	}))
	defer srv.Close()
	c := &Client{BaseURL: srv.URL}
	ctx := context.Background()
	rec, err := c.AwaitRequest(ctx, "late", 5*time.Second)
	if err != nil || rec.RequestID != "late" || calls.Load() != 3 {
		t.Fatalf("late record: %v %+v after %d calls", err, rec, calls.Load())
	}
	start := time.Now()
	var ae *APIError
	if _, err := c.AwaitRequest(ctx, "denied", 5*time.Second); !errors.As(err, &ae) || ae.Status != 401 || time.Since(start) > time.Second {
		t.Fatalf("a 401 is not waited on: %v after %v", err, time.Since(start))
	}
	if _, err := c.AwaitRequest(ctx, "never", 100*time.Millisecond); !errors.As(err, &ae) || ae.Status != 404 {
		t.Fatalf("a record that never comes: %v", err)
	}
}
