package auth

import (
	"net/http/httptest"
	"testing"
)

func TestLookup(t *testing.T) {
	admin, client := NewKey("a-"), NewKey("c-")
	k := NewKeyring([]Entry{
		{Principal{Name: "ops", Role: RoleAdmin}, HashKey(admin)},
		{Principal{Name: "team-a", Role: RoleClient, Group: "team-a"}, HashKey(client)},
	})
	if p, ok := k.Lookup(admin); !ok || p.Name != "ops" || p.Role != RoleAdmin {
		t.Fatalf("admin = %+v %v", p, ok)
	}
	if p, ok := k.Lookup(client); !ok || p.Group != "team-a" {
		t.Fatalf("client = %+v %v", p, ok)
	}
	for _, bad := range []string{"", admin[:len(admin)-1], admin + "x", "nope"} {
		if _, ok := k.Lookup(bad); ok {
			t.Errorf("Lookup(%q) matched", bad)
		}
	}
	h, err := ParseHash(HashKey(admin).String())
	if err != nil || h != HashKey(admin) {
		t.Fatalf("hash round trip: %v", err)
	}
}

func TestFromRequest(t *testing.T) {
	tests := []struct {
		header, value, query, want string
	}{
		{"Authorization", "Bearer sk-1", "", "sk-1"},
		{"Authorization", "bearer  sk-2 ", "", "sk-2"},
		{"Authorization", "Basic abc", "", ""},
		{"X-Api-Key", "sk-3", "", "sk-3"},
		{"X-Goog-Api-Key", "sk-4", "", "sk-4"},
		{"Api-Key", "sk-8", "", "sk-8"}, // Azure OpenAI's SDKs
		{"", "", "key=sk-5", "sk-5"},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("POST", "/v1/x?"+tt.query, nil)
		if tt.header != "" {
			r.Header.Set(tt.header, tt.value)
		}
		if got := FromRequest(r); got != tt.want {
			t.Errorf("%s: %q = %q, want %q", tt.header, tt.value, got, tt.want)
		}
	}
}

func TestFromHeaders(t *testing.T) {
	tests := []struct {
		header, value, query, want string
	}{
		{"Authorization", "Bearer sk-1", "", "sk-1"},
		{"Authorization", "bearer  sk-2 ", "", "sk-2"},
		{"Authorization", "Basic abc", "", ""},
		{"X-Api-Key", "sk-3", "", "sk-3"},
		{"Authorization", "Bearer sk-6", "key=sk-7", "sk-6"},
		// Only in the URL, or in the Gemini header: not a read API key.
		{"", "", "key=sk-5", ""},
		{"X-Goog-Api-Key", "sk-4", "", ""},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", "/api/requests?"+tt.query, nil)
		if tt.header != "" {
			r.Header.Set(tt.header, tt.value)
		}
		if got := FromHeaders(r); got != tt.want {
			t.Errorf("%s: %q, query %q = %q, want %q", tt.header, tt.value, tt.query, got, tt.want)
		}
	}
}
