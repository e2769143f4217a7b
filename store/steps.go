package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/fixpoint-dev/fixpoint"
)

// An attempt's step columns (migration 015): which part of a document
// strategy the call was. Every way an attempt reaches the ledger (the
// results' COPY, a wave's outcome, a call kept apart) writes them with
// stepValues, and every read of attempts scans them with stepScan.

// stepSelect are the step columns of attempts a, in stepScan's order.
const stepSelect = `coalesce(a.step, ''), a.chunk_n, a.chunk_start, a.chunk_end, a.fields, a.tool_calls::text, a.conflicts::text`

// checkStep says what is wrong with the step columns of a, nil when they
// can be stored.
func (a *Attempt) checkStep() error {
	if a.Step != "" && !slices.Contains(fixpoint.StepKinds, fixpoint.StepKind(a.Step)) {
		return fmt.Errorf("step %q: want one of chunk, merge, repair, agent", a.Step)
	}
	if c := a.Chunk; c != nil && (c.N < 0 || c.Start < 0 || c.End < c.Start) {
		return fmt.Errorf("chunk %d [%d, %d): want a number and offsets from 0, the end not before the start", c.N, c.Start, c.End)
	}
	if a.Fields != nil && *a.Fields < 0 {
		return fmt.Errorf("fields %d: want 0 or more", *a.Fields)
	}
	for _, f := range []struct {
		name string
		raw  json.RawMessage
	}{{"tool_calls", a.ToolCalls}, {"conflicts", a.Conflicts}} {
		if !absentJSON(f.raw) && !jsonArray(f.raw) {
			return errors.New(f.name + " is not a JSON array")
		}
	}
	return nil
}

// absentJSON reports whether r holds nothing: empty, or JSON null (what a
// nil RawMessage becomes through encoding/json, as in a spill file).
func absentJSON(r json.RawMessage) bool {
	return len(r) == 0 || string(bytes.TrimSpace(r)) == "null"
}

// jsonArray reports whether r, valid JSON, is an array.
func jsonArray(r json.RawMessage) bool {
	for _, b := range r {
		switch b {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return b == '['
	}
	return false
}

// stepValues are the values of the columns step, chunk_n, chunk_start,
// chunk_end, fields, tool_calls and conflicts of a: NULL for what a does
// not have, so that an ordinary job's row stays as small as before.
func (a *Attempt) stepValues() []any {
	v := make([]any, 7)
	v[0] = nullText(a.Step)
	if c := a.Chunk; c != nil {
		v[1], v[2], v[3] = int32(c.N), int32(c.Start), int32(c.End)
	}
	if a.Fields != nil {
		v[4] = int32(*a.Fields)
	}
	for i, r := range []json.RawMessage{a.ToolCalls, a.Conflicts} {
		if !absentJSON(r) {
			v[5+i] = pgJSON(r)
		}
	}
	return v
}

// stepScan holds the step columns of a row being scanned (stepSelect).
type stepScan struct {
	step                 string
	n, start, end        *int
	fields               *int
	toolCalls, conflicts *string
}

// dest are the scan destinations, in stepSelect's order.
func (s *stepScan) dest() []any {
	return []any{&s.step, &s.n, &s.start, &s.end, &s.fields, &s.toolCalls, &s.conflicts}
}

// set puts the scanned columns into a.
func (s *stepScan) set(a *Attempt) {
	a.Step, a.Fields = s.step, s.fields
	a.Chunk = nil
	if s.n != nil && s.start != nil && s.end != nil {
		a.Chunk = &fixpoint.ChunkRef{N: *s.n, Start: *s.start, End: *s.end}
	}
	a.ToolCalls, a.Conflicts = rawPtr(s.toolCalls), rawPtr(s.conflicts)
}
