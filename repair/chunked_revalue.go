package repair

import (
	"fmt"

	json "github.com/segmentio/encoding/json"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/merge"
	"github.com/fixpoint-dev/fixpoint/validate"
)

// revalue gives back their values to the attempts of an earlier run read
// from the ledger, which keeps no value per attempt (ledgerrow.ResultFrom):
// a chunk's, a merge call's or a repair's reply is checked again as its
// step checked it (a valid chunk's value is merged, an invalid one's
// pruned and merged, see contribution). A merge by rule keeps no reply:
// its value is made again once the chunks are replayed (see remerge).
// Without them a job continued from the ledger (its next wave, or
// realtime after its waves) would merge nothing and send its repair an
// empty value.
func (m *chunked) revalue() {
	for i := range m.res.Attempts {
		a := &m.res.Attempts[i]
		if len(a.Value) > 0 || a.Raw == "" || a.Class == fixpoint.OutcomeProvider {
			continue
		}
		schema := m.job.Schema
		if a.Step == fixpoint.StepChunk {
			schema = m.check
		}
		// A reply cut off at the output limit was not coerced (Step.checkReply).
		coerce := Coercer(m.lim.Coerce)
		if a.Class == fixpoint.OutcomeTruncated {
			coerce = nil
		}
		check := validate.CheckWith(schema, a.Raw, validate.CheckOptions{Coerce: coerce})
		if check.Value == nil && check.Source == "" {
			continue
		}
		if b, err := json.Marshal(check.Value); err == nil {
			a.Value = b
		}
	}
}

// remerge gives the merge attempt a, read from the ledger with no value,
// the value it recorded: the merge made again from the chunks replayed
// (merge.Values is deterministic).
func (m *chunked) remerge(a *fixpoint.Attempt) {
	if len(a.Value) > 0 {
		return
	}
	value, _, err := m.mergedValue()
	if err != nil || value == nil {
		return
	}
	if b, err := json.Marshal(value); err == nil {
		a.Value = b
	}
}

// mergedValue is the value the chunks give: the value they built
// (sequential), or their contributions merged (parallel), with the
// conflicts; nil when no chunk gave one.
func (m *chunked) mergedValue() (any, []fixpoint.Conflict, error) {
	if m.lim.Strategy == fixpoint.StrategySequential {
		return m.soFar, nil, nil
	}
	var values []merge.ChunkValue
	for _, u := range m.readers() {
		if v, ok := m.contribution(u); ok {
			values = append(values, merge.ChunkValue{Chunk: u.ref.N, Pass: u.ref.Pass, Value: v, Grades: chunkGrades(u, v)})
		}
	}
	if len(values) == 0 {
		return nil, nil, nil
	}
	value, conflicts, err := merge.Values(m.job.Schema, values, merge.Options{})
	if err != nil {
		return nil, nil, fmt.Errorf("merge the values of %d chunks: %v", len(values), err)
	}
	return value, conflicts, nil
}

// chunkGrades are the grades of v, u's contribution, against u's chunk,
// by leaf, so that the merge prefers a grounded value to an invented one;
// nil when the chunk is not graded (the evidence stage off, or grading
// against something else than the document). They are graded again
// rather than read from the attempt: a pruned contribution's places
// differ from its attempt's, and the ledger keeps no grades to replay.
func chunkGrades(u *unit, v any) map[string]fixpoint.Grade {
	c := u.step.job.Checks()
	if !c.evidenceOn() {
		return nil
	}
	leaves := c.Source.Align(v, c.Exempt).Leaves
	grades := make(map[string]fixpoint.Grade, len(leaves))
	for _, l := range leaves {
		grades[l.Path] = l.Grade
	}
	return grades
}
