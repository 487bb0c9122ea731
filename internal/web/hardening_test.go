package web

import (
	"strings"
	"testing"
)

// TestDotSegmentIDs: a request id of "." or ".." (sent escaped, so that it
// reaches the view) is a request that does not exist, not a redirect
// without a Location.
func TestDotSegmentIDs(t *testing.T) {
	fx := newFixture(t, standardRecords(), nil)
	for _, id := range []string{"%2e%2e", "%2E%2E", "%2e", "..%2f..%2fapi"} {
		a := fx.get(t, "/ui/view/request/"+id, keyAdmin)
		if a.status/100 == 3 || a.status != 404 {
			t.Errorf("%s: %d (Location %q) %s, want 404", id, a.status, a.header.Get("Location"), a.body)
		}
	}
}

// TestLongPathsNotEchoed: a long path is quoted back clipped.
func TestLongPathsNotEchoed(t *testing.T) {
	fx := newFixture(t, nil, nil)
	long := strings.Repeat("p", 200<<10)
	for _, path := range []string{"/ui/" + long, "/api/" + long, "/api/requests/" + long,
		"/api/requests?" + long + "=1", "/api/stats?since=" + long, "/ui/view/requests?" + long + "=1"} {
		a := fx.get(t, path, keyAdmin)
		if a.status/100 != 4 || len(a.body) > 1024 {
			t.Errorf("%.20s…: %d, %d bytes of answer", path, a.status, len(a.body))
		}
	}
}
