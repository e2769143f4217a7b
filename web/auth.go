package web

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"
)

// TokenMinLength is the shortest admin token RequireToken takes, in
// characters: the token is all that stands between the network and the
// batch actions, so it must not be guessable (openssl rand -hex 16 gives
// 32).
const TokenMinLength = 16

// CheckToken says what is wrong with an admin token, or nil: blank, white
// space around it (a copy's stray newline, which no browser sends back),
// or shorter than TokenMinLength.
func CheckToken(token string) error {
	n := utf8.RuneCountInString(token)
	switch {
	case strings.TrimSpace(token) == "":
		return errors.New("is blank: give a random token of at least 16 characters (e.g. openssl rand -hex 16)")
	case strings.TrimFunc(token, unicode.IsSpace) != token:
		return errors.New("starts or ends with white space: remove it")
	case n < TokenMinLength:
		return fmt.Errorf("is %d character%s long: give at least %d (e.g. openssl rand -hex 16)", n, plural(n), TokenMinLength)
	}
	return nil
}

// RequireToken wraps h so that every request must carry token: as the
// password of HTTP Basic authentication (any user name; a browser asks
// once and sends it with every request of the page, the event streams
// included) or as "Authorization: Bearer TOKEN". Others get 401. A token
// CheckToken refuses (empty, blank, short) is a configuration mistake:
// every request is refused.
func RequireToken(h http.Handler, token string) http.Handler {
	want := sha256.Sum256([]byte(token))
	usable := CheckToken(token) == nil
	ok := func(got string) bool {
		sum := sha256.Sum256([]byte(got))
		return usable && subtle.ConstantTimeCompare(sum[:], want[:]) == 1
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
