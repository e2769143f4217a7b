package llm

import (
	"net/url"
	"strconv"
	"strings"
)

// endpointURL is the URL of path under base: path joins base's path, and
// base's query (an Azure-style ?api-version=..., a gateway's token) is kept
// after it and merged with query. Appending path to the text of base put it
// inside such a query, so no call reached the endpoint.
func endpointURL(base *url.URL, path string, query url.Values) string {
	u := *base
	u.Path = strings.TrimRight(base.Path, "/") + path
	if base.RawPath != "" {
		u.RawPath = strings.TrimRight(base.RawPath, "/") + path
	}
	if len(query) > 0 {
		q := base.Query()
		for k, vs := range query {
			q[k] = vs
		}
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// trimBaseURL drops the trailing slashes of a base URL's path, before any
// query or fragment.
func trimBaseURL(s string) string {
	i := strings.IndexAny(s, "?#")
	if i < 0 {
		return strings.TrimRight(s, "/")
	}
	return strings.TrimRight(s[:i], "/") + s[i:]
}

// RedactURL returns s with its query values and its password replaced by
// "redacted", for logs and messages: a base URL's query may carry a key or
// a signature (?api-key=..., ?sig=...). The names stay, so a reader still
// sees which parameters were sent. Text that is not a URL is returned
// with everything after a '?' redacted.
func RedactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		if i := strings.IndexByte(s, '?'); i >= 0 {
			return s[:i+1] + redacted
		}
		return s
	}
	if u.RawQuery != "" {
		parts := strings.Split(u.RawQuery, "&")
		for i, p := range parts {
			if k, _, ok := strings.Cut(p, "="); ok {
				parts[i] = k + "=redacted"
			}
		}
		u.RawQuery = strings.Join(parts, "&")
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "redacted")
		}
	}
	return u.String()
}

// ServerOf returns the host and port a base URL's calls go to, the port
// from its scheme when it names none; "", 0 when it names no host. Only
// these: a base URL may carry credentials or a query.
func ServerOf(baseURL string) (host string, port int) {
	u, err := url.Parse(baseURL)
	if err != nil || u.Host == "" {
		return "", 0
	}
	p := u.Port()
	if p == "" {
		p = map[string]string{"http": "80", "https": "443"}[strings.ToLower(u.Scheme)]
	}
	port, _ = strconv.Atoi(p)
	return u.Hostname(), port
}
