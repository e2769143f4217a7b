package web_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint/web"
)

// adminToken is a token RequireToken takes.
const adminToken = "test-admin-token-0123456789"

// A token too weak to guard the actions (blank, padded, short) lets no
// request through, even one that gives it; a strong one lets its own in.
func TestRequireToken(t *testing.T) {
	t.Parallel()
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	status := func(token, given string) int {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set("Authorization", "Bearer "+given)
		web.RequireToken(ok, token).ServeHTTP(rec, req)
		return rec.Code
	}
	for _, weak := range []string{"", " ", "x", "0123456789abcde", " 0123456789abcdef", strings.Repeat(" ", 20)} {
		if got := status(weak, weak); got != http.StatusUnauthorized {
			t.Errorf("token %q given: %d, want 401 (the token is too weak to be used)", weak, got)
		}
		if web.CheckToken(weak) == nil {
			t.Errorf("CheckToken(%q) = nil", weak)
		}
	}
	if got := status(adminToken, adminToken); got != http.StatusNoContent {
		t.Errorf("the right token: %d", got)
	}
	if got := status(adminToken, adminToken[:len(adminToken)-1]); got != http.StatusUnauthorized {
		t.Errorf("a wrong token: %d", got)
	}
	if err := web.CheckToken("0123456789abcdef"); err != nil {
		t.Errorf("a 16-character token: %v", err)
	}
}
