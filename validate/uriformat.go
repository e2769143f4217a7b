package validate

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The schema library checks "uri", "uri-reference", "iri" and
// "iri-reference" with net/url, which accepts characters RFC 3986 leaves
// out of a URI: "not a uri" passed as a uri-reference and
// "https://example.com/a b" as a uri. These replace its checks: the
// characters first (RFC 3986 section 2, and for an IRI the non-ASCII
// characters RFC 3987 adds), then the parse and the library's other rules
// (an absolute URI has a scheme, an IPv6 host is bracketed and valid, a
// reference has no backslash).

// registerURIFormats registers the URI and IRI formats on c.
func registerURIFormats(c *jsonschema.Compiler) {
	for _, f := range []struct {
		name      string
		iri, abs  bool
		reference bool
	}{
		{name: "uri", abs: true},
		{name: "uri-reference", reference: true},
		{name: "iri", iri: true, abs: true},
		{name: "iri-reference", iri: true, reference: true},
	} {
		c.RegisterFormat(&jsonschema.Format{Name: f.name, Validate: func(v any) error {
			s, ok := v.(string)
			if !ok {
				return nil
			}
			return checkURI(s, f.iri, f.abs)
		}})
	}
}

// checkURI checks s as a URI (an IRI when iri), absolute when abs, else a
// reference.
func checkURI(s string, iri, abs bool) error {
	if err := uriChars(s, iri); err != nil {
		return err
	}
	if !abs && strings.Contains(s, `\`) {
		return errors.New(`contains \`)
	}
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return err
	}
	if host := u.Hostname(); strings.Contains(host, ":") {
		if !strings.Contains(u.Host, "[") {
			return errors.New("ipv6 address not enclosed in brackets")
		}
		if net.ParseIP(host) == nil {
			return fmt.Errorf("invalid ipv6 address %q", host)
		}
	}
	if abs && !u.IsAbs() {
		return errors.New("relative url: a URI starts with a scheme, such as https:")
	}
	return nil
}

// uriChars reports the first character of s that no URI (no IRI, when
// iri) may hold where it stands: outside the unreserved, reserved and
// percent-encoded characters, a second "#", a second "@" in the authority,
// or "[" or "]" outside the host.
func uriChars(s string, iri bool) error {
	// The authority, where an IPv6 literal's brackets may stand.
	authStart, authEnd := -1, -1
	if i := strings.Index(s, "//"); i >= 0 && !strings.ContainsAny(s[:i], "/?#") {
		authStart = i + 2
		authEnd = len(s)
		if j := strings.IndexAny(s[authStart:], "/?#"); j >= 0 {
			authEnd = authStart + j
		}
	}
	hashes, ats := 0, 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			return fmt.Errorf("invalid UTF-8 at byte %d", i)
		case r >= utf8.RuneSelf:
			if !iri || !iriChar(r) {
				return fmt.Errorf("character %q at %d is not allowed: percent-encode it", r, i)
			}
		case r == '%':
			if i+2 >= len(s) || !uriHex(s[i+1]) || !uriHex(s[i+2]) {
				return fmt.Errorf(`"%%" at %d is not followed by two hex digits`, i)
			}
		case r == '#':
			if hashes++; hashes > 1 {
				return fmt.Errorf(`a second "#" at %d: the fragment cannot hold one`, i)
			}
		case r == '@' && i >= authStart && i < authEnd:
			if ats++; ats > 1 {
				return fmt.Errorf(`a second "@" at %d: the authority holds at most one`, i)
			}
		case r == '[' || r == ']':
			if i < authStart || i >= authEnd {
				return fmt.Errorf("%q at %d is allowed only around an IPv6 host", r, i)
			}
		case r < utf8.RuneSelf && !uriASCII[r]:
			return fmt.Errorf("character %q at %d is not allowed in a URI: percent-encode it", r, i)
		}
		i += size
	}
	return nil
}

// uriASCII marks the ASCII characters a URI may hold (RFC 3986: unreserved,
// gen-delims and sub-delims); "%" is checked apart.
var uriASCII = func() (t [utf8.RuneSelf]bool) {
	for _, r := range "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~:/?#[]@!$&'()*+,;=" {
		t[r] = true
	}
	return t
}()

// iriChar reports whether r, beyond ASCII, may stand in an IRI (RFC 3987
// ucschar and iprivate).
func iriChar(r rune) bool {
	switch {
	case r >= 0xA0 && r <= 0xD7FF, r >= 0xF900 && r <= 0xFDCF, r >= 0xFDF0 && r <= 0xFFEF:
		return true
	case r >= 0xE000 && r <= 0xF8FF: // iprivate
		return true
	case r >= 0x10000 && r <= 0x10FFFD:
		return r&0xFFFE != 0xFFFE // not a noncharacter
	}
	return false
}

func uriHex(b byte) bool {
	return b >= '0' && b <= '9' || b >= 'a' && b <= 'f' || b >= 'A' && b <= 'F'
}
