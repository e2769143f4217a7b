package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/cli"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/cliflags"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/evidence"
	"github.com/fixpoint-dev/fixpoint/repair"
	"github.com/fixpoint-dev/fixpoint/validate"
)

const checkUsage = `Usage: worker check [--schema FILE] [--source FILE] [--evidence MODE] [--jsonl] [FILE|-]

Runs extract and validate on a model reply (FILE, or standard input), then the
schema's rules (x-fixpoint-rules, docs/rules.md) and, with --source, the
evidence stage (docs/evidence.md), and prints one JSON object:
  {"valid", "value", "class", "errors": [{"path","keyword","class","message"}],
   "repairs": [{"kind","offset"}], "source", "truncated",
   "warnings": [...], "evidence": [{"path","grade","start","end"}]}
warnings are the failures of rules of severity warn (present when there are
some); evidence grades each string and number of a valid value against the
--source text, start and end being code point offsets into it (present when
the stage ran). Under --evidence require a value the source does not hold is
not valid (class evidence).
Past 20,000 errors, the last error (keyword "moreErrors") counts the others.
Without --schema, valid means a value was extracted. A truncated reply is never
valid. With several candidates, the first that validates is chosen; if none
does, the one with the fewest errors. Two candidates that validate with
different values ("1 500", an example before the answer) are not valid: the
error "ambiguous" asks for one.

With --jsonl each input line is {"id": ..., "text": "...", "schema": <optional
inline schema>} and each output line is {"id": ...} plus the fields above, in
input order. A line that cannot be read (not JSON, no "text", a bad inline
schema) gets {"id": null, "line": N, "error": ...}; blank lines are skipped.

  worker check --schema ticket.json reply.txt
  echo '{"priority": "HIGH",}' | worker check --schema ticket.json

Exit status: 0 valid (and, under --evidence require, grounded), 1 not valid,
2 bad usage or an unreadable schema (or one no value satisfies, or a rule that
does not compile).
With --jsonl: 0 when every line was read (valid or not; see each "valid"),
1 when a line could not be read ("N of M lines could not be read" on stderr),
2 bad usage, an unreadable schema or input that stops being readable.`

// checkCommand is worker check.
type checkCommand struct {
	stdin          io.Reader
	stdout, stderr io.Writer
}

func (c *checkCommand) Run(_ context.Context, args []string) error {
	stdin, stdout, stderr := c.stdin, c.stdout, c.stderr
	fs := newFlagSet("worker check", checkUsage, "", stdout)
	schemaFile := fs.String("schema", "", "JSON Schema file (2020-12 by default; draft-07 when $schema says so)")
	jsonl := fs.Bool("jsonl", false, "read JSONL records {id, text, schema, source} and write one result per line")
	fs.Bool("json", true, "print the verdict as one JSON object (always so; accepted as worker try takes it)")
	coerceFlag := fs.String("coerce", string(fixpoint.CoerceSafe), "schema-guided local repairs, as a batch's --coerce: none, safe or all; each fix is listed in repairs with its pointer, kind, before and after")
	evidenceFlag := fs.String("evidence", string(fixpoint.EvidenceDefault), "with --source: check (grade each string and number of a valid value against the source) or require (one the source does not hold makes the value not valid, class evidence); off")
	sourceFile := fs.String("source", "", "text file the value's strings and numbers are checked against (the evidence stage; a --jsonl record's \"source\" overrides it)")
	files, err := cliflags.ParseArgs(fs, args)
	if err != nil {
		return err
	}
	mode, err := fixpoint.ParseCoerceMode(*coerceFlag)
	if err != nil {
		return usagef("--coerce: %v", err)
	}
	opt := validate.CheckOptions{Coerce: repair.Coercer(mode)}
	if len(files) > 1 {
		return usagef("at most one input file, got %d: %q", len(files), files)
	}
	after, err := newAfterSchema(*evidenceFlag, *sourceFile)
	if err != nil {
		return err
	}
	var schema *checkSchema
	if *schemaFile != "" {
		var raw []byte
		if schema, raw, err = after.readSchema(*schemaFile); err != nil {
			return err
		}
		for _, w := range enqueue.SchemaWarnings(raw) {
			fmt.Fprintf(stderr, "worker check: warning: %s\n", w)
		}
	}
	in := stdin
	if len(files) == 1 && files[0] != "-" {
		name := files[0]
		f, err := os.Open(name)
		if err != nil {
			return usagef("%v", err)
		}
		defer f.Close()
		in = f
	}
	if *jsonl {
		return checkLines(in, stdout, stderr, schema, opt, after)
	}
	text, err := io.ReadAll(in)
	if err != nil {
		return usagef("read input: %v", err)
	}
	if !utf8.Valid(text) {
		// A provider's reply is always UTF-8 (it comes inside JSON); read
		// as it is, each bad byte became U+FFFD and the value was valid.
		return fmt.Errorf("the reply is not UTF-8 (byte 0x%02x at offset %d): a provider's reply never is; convert it, e.g. iconv -f latin1 -t utf-8", text[badUTF8(text)], badUTF8(text))
	}
	res := schema.check(string(text), opt, after)
	out, err := json.Marshal(res)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s\n", out)
	if !res.Valid {
		return errNotValid
	}
	return nil
}

type checkRecord struct {
	ID     json.RawMessage `json:"id"`
	Text   *string         `json:"text"`
	Schema json.RawMessage `json:"schema"`
	Source *string         `json:"source"`
}

// exactRecordKeys refuses a record whose id, text or schema is written
// twice or in another case: Go's decoder kept the last of two and matched
// "Schema" to schema, so the record checked was not the one written.
// Other fields, and what they hold, are not its business. It returns the
// id as written under "id" (the decoder took "ID" for it).
func exactRecordKeys(raw []byte) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // {
		return nil, err
	}
	seen := map[string]bool{}
	var id json.RawMessage
	var bad error
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		for _, want := range []string{"id", "text", "schema"} {
			switch {
			case k == want && seen[k] && bad == nil:
				bad = fmt.Errorf("key %q appears twice in the record", k)
			case k != want && strings.EqualFold(k, want) && bad == nil:
				bad = fmt.Errorf("key %q: the field is %q", k, want)
			}
		}
		seen[k] = true
		if k == "id" && id == nil {
			id = v
		}
	}
	return id, bad
}

func checkLines(in io.Reader, stdout, stderr io.Writer, defaultSchema *checkSchema, opt validate.CheckOptions, after afterSchema) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	compiled := newSchemaCache(checkSchemaCacheMax)
	line := 0
	records, bad := 0, 0
	for sc.Scan() {
		line++
		raw := bytes.TrimSpace(sc.Bytes())
		if line == 1 {
			raw = cli.TrimBOM(raw)
		}
		if len(raw) == 0 {
			continue
		}
		records++
		var rec checkRecord
		err := json.Unmarshal(raw, &rec)
		var typeErr *json.UnmarshalTypeError
		switch {
		case raw[0] != '{':
			err = errors.New("not a JSON object")
		case errors.As(err, &typeErr):
			err = fmt.Errorf("%q is a JSON %s, want a string", typeErr.Field, typeErr.Value) // only text has a type
		case err == nil && rec.Text == nil:
			err = fmt.Errorf(`no "text" field`)
		}
		if raw[0] == '{' {
			id, kerr := exactRecordKeys(raw)
			if id != nil {
				rec.ID = id
			}
			if err == nil {
				err = kerr
			}
		}
		schema := defaultSchema
		if err == nil && len(rec.Schema) > 0 && string(rec.Schema) != "null" {
			key := string(rec.Schema)
			if s, ok := compiled.get(key); ok {
				schema = s
			} else if schema, err = after.compile(rec.Schema); err == nil {
				compiled.put(key, schema)
			} else {
				err = fmt.Errorf("schema: %w", err)
			}
		}
		if err != nil {
			bad++
			out, _ := json.Marshal(map[string]any{"id": nil, "line": line, "error": err.Error()})
			if len(rec.ID) > 0 {
				out, _ = json.Marshal(map[string]any{"id": rec.ID, "line": line, "error": err.Error()})
			}
			fmt.Fprintf(w, "%s\n", out)
			continue
		}
		lineAfter := after
		if rec.Source != nil && after.mode != fixpoint.EvidenceOff {
			lineAfter.source = evidence.New(*rec.Source)
		}
		res, _ := json.Marshal(schema.check(*rec.Text, opt, lineAfter))
		id := rec.ID
		if len(id) == 0 {
			id = json.RawMessage("null")
		}
		// {"id": ...} first, then the check fields.
		fmt.Fprintf(w, "{\"id\":%s,%s\n", id, res[1:])
	}
	if err := sc.Err(); err != nil {
		return usagef("read line %d: %v", line+1, err)
	}
	if bad > 0 {
		// The output lines go out before the count, and the count alone
		// decides the status: errNotValid adds nothing to stderr.
		if err := w.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "worker check: %d of %s could not be read (see their error fields)\n", bad, cli.Plural(records, "line"))
		return errNotValid
	}
	return w.Flush()
}

// badUTF8 is the offset of text's first byte that is not UTF-8.
func badUTF8(text []byte) int {
	at := 0
	for at < len(text) {
		r, size := utf8.DecodeRune(text[at:])
		if r == utf8.RuneError && size <= 1 {
			return at
		}
		at += size
	}
	return at
}

// checkSchemaCacheMax bounds the compiled schemas `worker check --jsonl`
// keeps: a file whose every line brings its own schema would otherwise keep
// them all (a compiled schema can take megabytes). Lines usually share a
// few schemas, which stay cached.
const checkSchemaCacheMax = 64

// schemaCache keeps the last max schemas compiled, by their text; the
// oldest goes first when it is full.
type schemaCache struct {
	max   int
	m     map[string]*checkSchema
	order []string
}

func newSchemaCache(max int) *schemaCache {
	return &schemaCache{max: max, m: map[string]*checkSchema{}}
}

func (c *schemaCache) get(key string) (*checkSchema, bool) {
	s, ok := c.m[key]
	return s, ok
}

func (c *schemaCache) put(key string, s *checkSchema) {
	if _, ok := c.m[key]; ok {
		return
	}
	if len(c.order) >= c.max {
		delete(c.m, c.order[0])
		c.order = c.order[1:]
	}
	c.m[key] = s
	c.order = append(c.order, key)
}
