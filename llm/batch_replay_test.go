package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// A Go port of the batch routes of the project's replay server
// (../shared/wire/replay.py, "Batch routes"): each route kind answers from
// its own list of fixture entries, the ids a response hands out (file id,
// batch id, output and error file ids) become variables the next entries
// can use, and a download can rewrite the custom_ids of its lines with the
// ones last uploaded, so one flow keeps its ids consistent from upload to
// download. It adds the list routes replay.py lacks; without entries they
// answer 404 like any unknown path there.

// loadBatchFixtures reads testdata/wire/batch.
func loadBatchFixtures(t testing.TB) map[string]*fixture {
	t.Helper()
	files, err := filepath.Glob("testdata/wire/batch/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no batch fixtures: %v", err)
	}
	out := make(map[string]*fixture, len(files))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var fx fixture
		if err := json.Unmarshal(data, &fx); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[fx.Name] = &fx
	}
	return out
}

// bEntry is one scripted answer of a batch route.
type bEntry struct {
	name string
	// set replaces top-level keys of the body; a string value "${name}"
	// takes the variable (batch_id, input_file_id, output_file_id,
	// error_file_id, results_url, base_url), and "${name}" inside a longer
	// string is replaced by its text.
	set map[string]any
	// customIDs rewrites the custom_id of the n-th line of a download: an
	// int is an index into the ids last uploaded, a string is used as is.
	customIDs []any
	status    int    // 0: the fixture's
	body      string // non-empty: served instead of the fixture's body
}

// bUpload is what a POST /files carried.
type bUpload struct {
	fields      map[string]string
	filename    string
	contentType string
	content     []byte
}

// bRequest is one request the replay saw.
type bRequest struct {
	kind, method, path, pathID string
	query                      url.Values
	header                     http.Header
	body                       []byte
	upload                     *bUpload
}

type batchReplay struct {
	t   *testing.T
	fx  map[string]*fixture
	srv *httptest.Server

	mu       sync.Mutex
	routes   map[string][]bEntry
	served   map[string]int
	vars     map[string]map[string]any // provider -> name -> value
	uploaded map[string][]string       // provider -> custom_ids of the last upload or create
	reqs     []bRequest
}

// batchRoutes are replay.py's route kinds (first match wins) plus lists.
var batchRoutes = []struct {
	kind, method string
	re           *regexp.Regexp
}{
	{"anthropic.batches.results", "GET", regexp.MustCompile(`/messages/batches/([^/]+)/results$`)},
	{"anthropic.batches.cancel", "POST", regexp.MustCompile(`/messages/batches/([^/]+)/cancel$`)},
	{"anthropic.batches.retrieve", "GET", regexp.MustCompile(`/messages/batches/([^/]+)$`)},
	{"anthropic.batches.create", "POST", regexp.MustCompile(`/messages/batches$`)},
	{"anthropic.batches.list", "GET", regexp.MustCompile(`/messages/batches$`)},
	{"openai.files.content", "GET", regexp.MustCompile(`/files/([^/]+)/content$`)},
	{"openai.files.create", "POST", regexp.MustCompile(`/files$`)},
	{"openai.batches.cancel", "POST", regexp.MustCompile(`/batches/([^/]+)/cancel$`)},
	{"openai.batches.retrieve", "GET", regexp.MustCompile(`/batches/([^/]+)$`)},
	{"openai.batches.create", "POST", regexp.MustCompile(`/batches$`)},
	{"openai.batches.list", "GET", regexp.MustCompile(`/batches$`)},
}

func newBatchReplay(t *testing.T, routes map[string][]bEntry) *batchReplay {
	t.Helper()
	r := &batchReplay{t: t, fx: loadBatchFixtures(t), routes: routes, served: map[string]int{},
		vars: map[string]map[string]any{"openai": {}, "anthropic": {}}, uploaded: map[string][]string{}}
	for kind, entries := range routes {
		for _, e := range entries {
			if _, ok := r.fx[e.name]; !ok && e.body == "" {
				t.Fatalf("route %s: no fixture %s", kind, e.name)
			}
		}
	}
	r.srv = httptest.NewServer(http.HandlerFunc(r.handle))
	t.Cleanup(r.srv.Close)
	return r
}

// requests returns the requests seen so far.
func (r *batchReplay) requests() []bRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]bRequest(nil), r.reqs...)
}

func (r *batchReplay) handle(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	rec := bRequest{method: req.Method, path: req.URL.Path, query: req.URL.Query(), header: req.Header.Clone(), body: body}
	for _, rt := range batchRoutes {
		if rt.method != req.Method {
			continue
		}
		if m := rt.re.FindStringSubmatch(strings.TrimRight(req.URL.Path, "/")); m != nil {
			rec.kind = rt.kind
			if len(m) > 1 {
				rec.pathID = m[1]
			}
			break
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	provider, _, _ := strings.Cut(rec.kind, ".")
	switch rec.kind {
	case "openai.files.create":
		rec.upload = parseUpload(r.t, req.Header.Get("Content-Type"), body)
		var ids []string
		for _, line := range bytes.Split(bytes.TrimSpace(rec.upload.content), []byte("\n")) {
			var l struct {
				CustomID string `json:"custom_id"`
			}
			json.Unmarshal(line, &l)
			ids = append(ids, l.CustomID)
		}
		r.uploaded[provider] = ids
	case "anthropic.batches.create":
		var b struct {
			Requests []struct {
				CustomID string `json:"custom_id"`
			} `json:"requests"`
		}
		json.Unmarshal(body, &b)
		var ids []string
		for _, q := range b.Requests {
			ids = append(ids, q.CustomID)
		}
		r.uploaded[provider] = ids
	}
	r.reqs = append(r.reqs, rec)
	entries := r.routes[rec.kind]
	if rec.kind == "" || (len(entries) == 0 && strings.HasSuffix(rec.kind, ".list")) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, `{"error": "replay: no route for %s %s"}`, req.Method, req.URL.Path)
		return
	}
	if len(entries) == 0 {
		w.WriteHeader(599)
		fmt.Fprintf(w, `{"error":"replay: script has no entries for %s"}`, rec.kind)
		return
	}
	i := min(r.served[rec.kind], len(entries)-1) // repeat-last
	r.served[rec.kind]++
	e := entries[i]
	status, headers, out := r.render(e, provider, "http://"+req.Host)
	for k, v := range headers {
		w.Header().Set(k, v)
	}
	w.WriteHeader(status)
	w.Write(out)
}

var customIDRE = regexp.MustCompile(`("custom_id"\s*:\s*)"(?:[^"\\]|\\.)*"`)

// render builds an entry's answer and remembers the ids it hands out.
func (r *batchReplay) render(e bEntry, provider, base string) (int, map[string]string, []byte) {
	t := r.t
	status, headers := 200, map[string]string{"content-type": "application/json"}
	var body []byte
	if fx := r.fx[e.name]; fx != nil {
		status, headers, body = fx.Status, fx.Headers, fx.wireBytes(t)
	}
	if e.body != "" {
		body = []byte(e.body)
	}
	if e.status != 0 {
		status = e.status
	}
	vars := r.vars[provider]
	lookup := func(name string) any {
		switch name {
		case "base_url":
			return base
		case "results_url":
			if v, ok := vars["results_url"]; ok {
				return v
			}
			return fmt.Sprintf("%s/v1/messages/batches/%v/results", base, vars["batch_id"])
		}
		v, ok := vars[name]
		if !ok {
			t.Errorf("replay: ${%s} has no value yet", name)
		}
		return v
	}
	if e.set != nil {
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatalf("replay: set on %s: %v", e.name, err)
		}
		for k, v := range e.set {
			if s, ok := v.(string); ok && strings.Contains(s, "${") {
				if name, whole := strings.CutPrefix(s, "${"); whole && strings.HasSuffix(name, "}") && !strings.Contains(name, "${") {
					v = lookup(strings.TrimSuffix(name, "}"))
				} else {
					v = regexp.MustCompile(`\$\{(\w+)\}`).ReplaceAllStringFunc(s, func(tok string) string {
						return fmt.Sprint(lookup(tok[2 : len(tok)-1]))
					})
				}
			}
			m[k] = v
		}
		body, _ = json.Marshal(m)
	}
	if e.customIDs != nil {
		lines := bytes.Split(body, []byte("\n"))
		for n := range lines {
			if n >= len(e.customIDs) || len(bytes.TrimSpace(lines[n])) == 0 {
				continue
			}
			id := e.customIDs[n]
			if i, ok := id.(int); ok {
				id = r.uploaded[provider][i]
			}
			q, _ := json.Marshal(id)
			lines[n] = customIDRE.ReplaceAll(lines[n], append([]byte("${1}"), q...))
		}
		body = bytes.Join(lines, []byte("\n"))
	}
	var obj map[string]any
	if json.Unmarshal(body, &obj) == nil && status < 300 {
		id, _ := obj["id"].(string)
		switch {
		case obj["object"] == "file":
			vars["input_file_id"] = id
		case obj["object"] == "batch" || obj["type"] == "message_batch":
			vars["batch_id"] = id
			for _, k := range []string{"input_file_id", "output_file_id", "error_file_id"} {
				if s, ok := obj[k].(string); ok {
					vars[k] = s
				}
			}
		}
	}
	return status, headers, body
}

// parseUpload reads a multipart/form-data body.
func parseUpload(t *testing.T, contentType string, body []byte) *bUpload {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "multipart/form-data" {
		t.Errorf("upload content type %q: %v", contentType, err)
		return &bUpload{}
	}
	up := &bUpload{fields: map[string]string{}}
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Errorf("upload: %v", err)
			return up
		}
		data, _ := io.ReadAll(p)
		if p.FileName() != "" {
			up.filename, up.contentType, up.content = p.FileName(), p.Header.Get("Content-Type"), data
			continue
		}
		up.fields[p.FormName()] = string(data)
	}
	return up
}
