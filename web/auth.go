package web

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// RequireToken wraps h so that every request must carry token: as the
// password of HTTP Basic authentication (any user name; a browser asks
// once and sends it with every request of the page, the event streams
// included) or as "Authorization: Bearer TOKEN". Others get 401. An empty
// token is a configuration mistake: every request is refused.
func RequireToken(h http.Handler, token string) http.Handler {
	want := sha256.Sum256([]byte(token))
	ok := func(got string) bool {
		sum := sha256.Sum256([]byte(got))
		return token != "" && subtle.ConstantTimeCompare(sum[:], want[:]) == 1
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, pass, basic := r.BasicAuth()
		bearer, hasBearer := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if (basic && ok(pass)) || (hasBearer && ok(bearer)) {
			h.ServeHTTP(w, r)
			return
		}
		w.Header().Set("WWW-Authenticate", `Basic realm="fixpoint dashboard", charset="UTF-8"`)
		w.Header().Set("Content-Security-Policy", ContentSecurityPolicy)
		http.Error(w, "401 unauthorized: give the admin token as the password (any user name)", http.StatusUnauthorized)
	})
}
