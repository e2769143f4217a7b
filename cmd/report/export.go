package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/fixpoint-dev/fixpoint/cmd/internal/cli"
	"github.com/fixpoint-dev/fixpoint/internal/csvcell"
	"github.com/fixpoint-dev/fixpoint/store"
)

const exportUsage = `Usage: report export BATCH [--format jsonl|csv] [--evidence] [--steps] [--require-done] [--csv-raw] [flags]

Writes each job of the batch on stdout, one line per job in row order: its
input row, its status, its value and why it is not valid, for a spreadsheet
or the next step of a pipeline. The value of a job that is not valid is the
one its last reply held (as far as local repairs took it; none when that
reply held none), with that reply's validation errors, so that a near-valid
row can be salvaged. A batch still running, or short of rows its datasets
had, is exported with a warning on stderr; with --require-done, a batch
with a job not final (or an enqueue still recording its rows) is an error
and nothing is written.

  report export nightly-2026-01-05 --format csv --require-done > labels.csv

Export formats:
  jsonl  {"id", "row", "status", "input": the input row, "value", "error",
         "errors"} per job: "error" says in one line why the job is not
         valid, "errors" lists its last reply's validation errors,
         [{"path", "keyword", "class", "message"}] ([] for a valid or queued
         job, and for one whose last attempt got no reply); with --evidence,
         "evidence": the grades of the value's strings and numbers against
         the job's source, [{"path", "grade", "start", "end"}] with start
         and end code point offsets into the source (null when none was
         graded); with --steps, "steps": a document job's steps in order
         (strategies parallel, sequential, agent), [{"no", "step", "chunk":
         {"n", "start", "end"} or null, "fields", "class", "valid",
         "tool_calls", "conflicts"}] (null for a job of another strategy).
  csv    the input's columns in the file's order (sorted for a batch enqueued
         before the order was recorded; keys only some rows have come after,
         sorted), then job_id, job_status, then one column per top-level
         property of the batch's schema in name order (the ledger keeps schemas
         with their keys sorted), then job_error and job_errors ("errors" as
         compact JSON, empty for none). A property named like an input
         column or a job_ column is written as value.NAME, an input column named
         like a job_ column as input.NAME; with --evidence, job_evidence
         after job_errors ("evidence" as compact JSON, empty for none); with
         --steps, job_steps last ("steps" as compact JSON, empty for none).
         Strings are written
         as themselves, other values as compact JSON, null or missing as empty;
         keys of a value that the schema does not list are left out (jsonl has
         the whole value). A schema without properties gives one job_value
         column (the whole value as JSON) instead of the property columns.
         A text cell (header too) starting with =, +, -, @, a tab or a
         carriage return gets a ' in front, so a spreadsheet does not run it
         as a formula; numbers (-3, and text that is a plain number) are left
         as they are. --csv-raw writes every cell as it is.

Exit status: 0 done, 1 an error (an unknown batch, or a job not final under
--require-done), 2 bad usage.`

// exportCommand is report export.
type exportCommand struct{ stdout, stderr io.Writer }

func (c *exportCommand) Run(ctx context.Context, args []string) error {
	fs, dbURL := newFlagSet("export", exportUsage, ledgerEnv, c.stdout)
	format := fs.String("format", "jsonl", "export format: jsonl or csv")
	requireDone := fs.Bool("require-done", false, "exit 1, writing nothing, when a job of the batch is not final")
	csvRaw := fs.Bool("csv-raw", false, "with --format csv: write cells starting with = + - @ as they are, without the ' that stops a spreadsheet running them")
	withSteps := fs.Bool("steps", false, "add each document job's steps: its latest run's chunk, merge, repair and agent attempts with their chunk, fields, tool calls and merge conflicts")
	withEvidence := fs.Bool("evidence", false, "add each job's grades and spans: how its value's strings and numbers were found in its source (the final check's: the latest run's revalidation, valid attempt or last attempt)")
	pos, err := parseArgs(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if *format != "jsonl" && *format != "csv" {
		return usageError{Err: fmt.Errorf("--format %q: want jsonl or csv", *format)}
	}
	if *csvRaw && *format != "csv" {
		return usageError{Err: fmt.Errorf("--csv-raw is for --format csv, not %s", *format)}
	}
	st, err := openLedger(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer st.Close()
	batch := pos[0]
	if *requireDone {
		if err := needDone(ctx, st, batch); err != nil {
			return err
		}
	}
	if err := export(ctx, c.stdout, st, batch, *format, exportOpts{raw: *csvRaw, evidence: *withEvidence, steps: *withSteps}); err != nil {
		return err
	}
	return exportWarnings(ctx, c.stderr, st, batch)
}

// exportLedger is what report export reads. *store.Store satisfies it.
type exportLedger interface {
	rowsLedger
	Progress(ctx context.Context, batch string) (store.Progress, error)
	ExportShape(ctx context.Context, batch string) (store.ExportShape, error)
	ExportWith(ctx context.Context, batch string, opts store.ExportOptions, fn func(store.ExportRow) error) error
}

var _ exportLedger = (*store.Store)(nil)

// needDone fails a batch with a job not final, or rows still being
// recorded, before a line of it is written: a script's "report export B >
// out.csv" then has no partial file to pick up.
func needDone(ctx context.Context, st exportLedger, batch string) error {
	if err := needBatch(ctx, st, batch); err != nil {
		return err
	}
	p, err := st.Progress(ctx, batch)
	if err != nil {
		return err
	}
	switch {
	case p.Recording != nil && p.Recording.Live:
		return fmt.Errorf("batch %s is not done: an enqueue is still recording its rows (--require-done)", batch)
	case p.Queued > 0:
		return fmt.Errorf("batch %s is not done: %d of %s %s still queued (--require-done)", batch, p.Queued, cli.Plural(p.Total, "job"), cli.Are(p.Queued))
	}
	return nil
}

// exportWarnings says on stderr, where a script's log sees it, that the
// file just written is partial: the batch is still running (its rows say
// job_status queued), or it is short of rows its datasets had (nothing in
// the file shows a row that is not there).
func exportWarnings(ctx context.Context, stderr io.Writer, st exportLedger, batch string) error {
	if p, err := st.Progress(ctx, batch); err == nil && p.Queued > 0 {
		fmt.Fprintf(stderr, "report: warning: batch %s is not done: %d of %s %s still queued, exported without a value\n", batch, p.Queued, cli.Plural(p.Total, "job"), cli.Are(p.Queued))
	}
	notes, err := missingRows(ctx, st, batch)
	if err != nil {
		return err
	}
	for _, n := range notes {
		fmt.Fprintf(stderr, "report: warning: %s\n", n)
	}
	return nil
}

// exportOpts are export's choices: raw leaves CSV cells unescaped;
// evidence adds each job's grades, steps its steps.
type exportOpts struct{ raw, evidence, steps bool }

// export writes the batch in format.
func export(ctx context.Context, w io.Writer, st exportLedger, batch, format string, o exportOpts) error {
	so := store.ExportOptions{Evidence: o.evidence, Steps: o.steps}
	switch format {
	case "jsonl":
		if err := needBatch(ctx, st, batch); err != nil {
			return err
		}
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false) // "<b>" as written, not "\u003cb\u003e"
		return st.ExportWith(ctx, batch, so, func(r store.ExportRow) error {
			line := map[string]any{"id": r.ID, "row": r.RowNo, "status": r.Status,
				"input": rawOrNull(r.Metadata), "value": rawOrNull(r.Value), "error": r.Error, "errors": rawOr(r.Errors, "[]")}
			if o.evidence {
				line["evidence"] = rawOrNull(r.Evidence)
			}
			if o.steps {
				line["steps"] = rawOrNull(r.Steps)
			}
			return enc.Encode(line)
		})
	case "csv":
		shape, err := st.ExportShape(ctx, batch)
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("no batch %q in the ledger", batch)
		}
		if err != nil {
			return err
		}
		cols := newCSVColumns(shape, o)
		cols.raw = o.raw
		cw := csv.NewWriter(w)
		header := make([]string, len(cols.header))
		for i, h := range cols.header {
			header[i] = cols.text(h)
		}
		if err := cw.Write(header); err != nil {
			return err
		}
		err = st.ExportWith(ctx, batch, so, func(r store.ExportRow) error {
			rec, err := cols.record(r)
			if err != nil {
				return fmt.Errorf("job %s: %w", r.ID, err)
			}
			return cw.Write(rec)
		})
		cw.Flush()
		if err != nil {
			return err
		}
		return cw.Error()
	}
	return usageError{Err: fmt.Errorf("--format %q: want jsonl or csv", format)}
}

// csvColumns lays out a batch's CSV export: the input columns, the job's
// own columns and one column per schema property (or job_value).
type csvColumns struct {
	header []string
	// inputs and props are the input keys and schema properties, in the
	// order of their columns; wholeValue writes job_value instead of props.
	inputs, props []string
	wholeValue    bool
	raw           bool // cells as they are, not escaped against formulas
	evidence      bool // job_evidence after job_errors
	steps         bool // job_steps last
}

// text is a text cell as written: escaped against formulas
// (csvcell.Text), unless raw.
func (c *csvColumns) text(s string) string {
	if c.raw {
		return s
	}
	return csvcell.Text(s)
}

// newCSVColumns builds the header: inputs (renamed input.NAME when NAME is
// one of the job's own columns), job_id, job_status, properties (renamed
// value.NAME when NAME is taken by an input or job column, and again while
// the new name is taken), job_error, job_errors, with evidence
// job_evidence and with steps job_steps. No two columns share a name.
func newCSVColumns(shape store.ExportShape, o exportOpts) *csvColumns {
	c := &csvColumns{inputs: shape.InputColumns, props: shape.Properties, wholeValue: len(shape.Properties) == 0,
		evidence: o.evidence, steps: o.steps}
	own := []string{"job_id", "job_status", "job_error", "job_errors", "job_value"}
	if o.evidence {
		own = append(own, "job_evidence")
	}
	if o.steps {
		own = append(own, "job_steps")
	}
	taken := map[string]bool{}
	for _, name := range own {
		taken[name] = true
	}
	for _, in := range c.inputs {
		taken[in] = true
	}
	for _, in := range c.inputs {
		name := in
		if slices.Contains(own, in) {
			for name = "input." + in; taken[name]; {
				name = "input." + name
			}
			taken[name] = true
		}
		c.header = append(c.header, name)
	}
	c.header = append(c.header, "job_id", "job_status")
	if c.wholeValue {
		c.header = append(c.header, "job_value")
	}
	for _, p := range c.props {
		name := p
		for taken[name] {
			name = "value." + name
		}
		taken[name] = true
		c.header = append(c.header, name)
	}
	c.header = append(c.header, "job_error", "job_errors")
	if o.evidence {
		c.header = append(c.header, "job_evidence")
	}
	if o.steps {
		c.header = append(c.header, "job_steps")
	}
	return c
}

// record is one job's CSV row under the header.
func (c *csvColumns) record(r store.ExportRow) ([]string, error) {
	var meta map[string]json.RawMessage
	if err := unmarshalObject(r.Metadata, &meta); err != nil {
		return nil, fmt.Errorf("input row: %w", err)
	}
	rec := make([]string, 0, len(c.header))
	for _, in := range c.inputs {
		cell, err := c.cell(meta[in])
		if err != nil {
			return nil, fmt.Errorf("input %s: %w", in, err)
		}
		rec = append(rec, cell)
	}
	rec = append(rec, c.text(r.ID), string(r.Status))
	if c.wholeValue {
		cell, err := c.cell(r.Value)
		if err != nil {
			return nil, fmt.Errorf("value: %w", err)
		}
		rec = append(rec, cell)
	} else {
		// A value that is not an object (an invalid job's last candidate)
		// has no properties: its columns stay empty.
		var value map[string]json.RawMessage
		_ = unmarshalObject(r.Value, &value)
		for _, p := range c.props {
			cell, err := c.cell(value[p])
			if err != nil {
				return nil, fmt.Errorf("value %s: %w", p, err)
			}
			rec = append(rec, cell)
		}
	}
	errs, err := csvCell(r.Errors)
	if err != nil {
		return nil, fmt.Errorf("errors: %w", err)
	}
	rec = append(rec, c.text(r.Error), c.text(errs))
	if c.evidence {
		ev, err := csvCell(r.Evidence)
		if err != nil {
			return nil, fmt.Errorf("evidence: %w", err)
		}
		rec = append(rec, c.text(ev))
	}
	if c.steps {
		steps, err := csvCell(r.Steps)
		if err != nil {
			return nil, fmt.Errorf("steps: %w", err)
		}
		rec = append(rec, c.text(steps))
	}
	return rec, nil
}

// cell is csvCell with a JSON string escaped as text; other JSON (a
// number such as -3, an array, an object) is left as it is.
func (c *csvColumns) cell(v json.RawMessage) (string, error) {
	s, err := csvCell(v)
	if err != nil || !isJSONString(v) {
		return s, err
	}
	return c.text(s), nil
}

func isJSONString(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) > 0 && v[0] == '"'
}

// unmarshalObject decodes a JSON object; empty input and null leave m nil.
func unmarshalObject(b json.RawMessage, m *map[string]json.RawMessage) error {
	if len(b) == 0 {
		return nil
	}
	return json.Unmarshal(b, m)
}

// csvCell writes a JSON value as a CSV cell: a string as itself, null or
// nothing as empty, anything else as compact JSON.
func csvCell(v json.RawMessage) (string, error) {
	v = bytes.TrimSpace(v)
	switch {
	case len(v) == 0 || string(v) == "null":
		return "", nil
	case v[0] == '"':
		var s string
		err := json.Unmarshal(v, &s)
		return s, err
	}
	var buf bytes.Buffer
	err := json.Compact(&buf, v)
	return buf.String(), err
}

func rawOrNull(b json.RawMessage) json.RawMessage { return rawOr(b, "null") }
