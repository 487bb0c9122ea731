package wire

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/ttfx/ttfx/internal/protocol"
)

func TestJoinPath(t *testing.T) {
	for _, tt := range []struct{ base, path, want string }{
		{"", "/v1/chat/completions", "/v1/chat/completions"},
		{"/", "/v1/chat/completions", "/v1/chat/completions"},
		{"/v1", "/v1/chat/completions", "/v1/chat/completions"},
		{"/openai/v1/", "/v1/responses", "/openai/v1/responses"},
		{"/v1beta", "/v1beta/models/m:generateContent", "/v1beta/models/m:generateContent"},
		{"/v1", "/v1beta/models/m:generateContent", "/v1/v1beta/models/m:generateContent"},
		{"/v1beta", "/v1/models", "/v1beta/v1/models"},
		{"/api/v1alpha", "/v1alpha/x", "/api/v1alpha/x"},
		{"/vx", "/vx/y", "/vx/vx/y"},
		{"/proxy", "/v1/messages", "/proxy/v1/messages"},
	} {
		if got := JoinPath(tt.base, tt.path); got != tt.want {
			t.Errorf("JoinPath(%q, %q) = %q, want %q", tt.base, tt.path, got, tt.want)
		}
	}
}

func TestJoinURLKeepsTheBaseQueryFirst(t *testing.T) {
	base, _ := url.Parse("https://r.example.com/openai?api-version=2024-10-21")
	u := JoinURL(base, "/v1/chat/completions", "alt=sse")
	if got, want := u.String(), "https://r.example.com/openai/v1/chat/completions?api-version=2024-10-21&alt=sse"; got != want {
		t.Errorf("JoinURL = %s, want %s", got, want)
	}
	if base.Path != "/openai" {
		t.Errorf("JoinURL changed the base: %s", base)
	}
}

// A registry of toy units: registering, looking up, guessing and serving
// work from the units alone; nothing else names them.
func TestRegistry(t *testing.T) {
	saved := struct {
		apis      map[string]*API
		apiOrder  []*API
		byPattern map[string]*API
		kinds     map[string]*Kind
		kindOrder []*Kind
		def       *API
	}{apis, apiOrder, byPattern, kinds, kindOrder, defaultAPI}
	t.Cleanup(func() {
		apis, apiOrder, byPattern, kinds, kindOrder, defaultAPI = saved.apis, saved.apiOrder, saved.byPattern, saved.kinds, saved.kindOrder, saved.def
	})
	apis, apiOrder, byPattern, kinds, kindOrder, defaultAPI = map[string]*API{}, nil, map[string]*API{}, map[string]*Kind{}, nil, nil

	if Default() != nil || Guess(httptest.NewRequest("GET", "/v1/x", nil)) != nil {
		t.Fatal("an empty registry has a default API")
	}
	if _, err := ParseKind("toy"); err == nil || !strings.Contains(err.Error(), "no provider unit is linked") {
		t.Errorf("ParseKind on an empty registry: %v", err)
	}
	body := func(e protocol.ErrorResponse) []byte { return []byte(e.Message) }
	ev := func(f Failure) []byte { return []byte(f.Msg) }
	plain := &API{Name: "plain.chat", Family: "plain", Default: true, ErrorBody: body, StreamError: ev,
		Endpoints: []Endpoint{{Pattern: "POST /v1/plain", HasBody: true}}}
	toy := &API{Name: "toy", Family: "toy", ErrorBody: body, StreamError: ev,
		Endpoints: []Endpoint{{Pattern: "POST /v2toy/models/{target}", HasBody: true}},
		Claim: func(r *http.Request) int {
			if strings.HasPrefix(r.URL.Path, "/v2toy/") {
				return 2
			}
			if r.Header.Get("Toy-Version") != "" {
				return 1
			}
			return 0
		}}
	RegisterAPI(toy)
	RegisterAPI(plain)
	RegisterKind(&Kind{Name: "toycloud", Families: []string{"toy", "plain"}, Authorize: func(h http.Header, key string) { h.Set("Toy-Key", key) }})

	if got := APIs(); len(got) != 2 || got[0] != plain || got[1] != toy {
		t.Errorf("APIs() not in name order: %v", got)
	}
	if LookupAPI("toy") != toy || LookupAPI("nope") != nil {
		t.Error("LookupAPI")
	}
	if got := Prefixes(); strings.Join(got, " ") != "/v1/ /v2toy/" {
		t.Errorf("Prefixes() = %v", got)
	}
	for path, want := range map[string]*API{"/v2toy/anything": toy, "/v1/other": plain} {
		if got := Guess(httptest.NewRequest("POST", path, nil)); got != want {
			t.Errorf("Guess(%s) = %s, want %s", path, got.Name, want.Name)
		}
	}
	r := httptest.NewRequest("GET", "/v1/models", nil)
	r.Header.Set("Toy-Version", "1")
	if Guess(r) != toy {
		t.Error("a header claim does not pick the API")
	}
	if !Serves("toycloud", "toy") || !Serves("toycloud", "plain") || Serves("toycloud", "other") {
		t.Error("Serves of a registered kind")
	}
	if !Serves("unlinked", "unlinked") || Serves("unlinked", "toy") {
		t.Error("an unregistered kind does not serve its own name's family only")
	}
	if k, err := ParseKind("toycloud"); err != nil || k.Name != "toycloud" {
		t.Errorf("ParseKind: %v", err)
	}
	if _, err := ParseKind("x"); err == nil || !strings.Contains(err.Error(), "want toycloud") {
		t.Errorf("ParseKind of an unknown kind: %v", err)
	}

	for name, f := range map[string]func(){
		"duplicate API": func() { RegisterAPI(&API{Name: "toy", Family: "toy", ErrorBody: body, StreamError: ev}) },
		"duplicate endpoint": func() {
			RegisterAPI(&API{Name: "toy2", Family: "toy", ErrorBody: body, StreamError: ev, Endpoints: toy.Endpoints})
		},
		"second default": func() { RegisterAPI(&API{Name: "d", Family: "d", ErrorBody: body, StreamError: ev, Default: true}) },
		"incomplete API": func() { RegisterAPI(&API{Name: "bare", Family: "bare"}) },
		"duplicate kind": func() {
			RegisterKind(&Kind{Name: "toycloud", Families: []string{"toy"}, Authorize: func(http.Header, string) {}})
		},
		"incomplete kind": func() { RegisterKind(&Kind{Name: "k"}) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

func TestEcho(t *testing.T) {
	if got := Echo("a\nb"); got != `"a\nb"` {
		t.Errorf("Echo = %s", got)
	}
	long := strings.Repeat("é", MaxEcho)
	got := Echo(long)
	if !strings.HasSuffix(got, "…") || len(got) > MaxEcho+8 {
		t.Errorf("Echo of %d bytes = %d bytes", len(long), len(got))
	}
}
