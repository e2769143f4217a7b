package repair

import (
	json "github.com/segmentio/encoding/json"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/merge"
	"github.com/fixpoint-dev/fixpoint/validate"
)

// revalue gives back their values to the attempts of an earlier run read
// from the ledger, which keeps no value per attempt (ledgerrow.ResultFrom):
// a chunk's or a repair's valid reply is checked again as its step checked
// it, and the merge attempt, which made no call, is merged again from the
// chunks (merge.Values is deterministic). Without them a job continued
// from the ledger (its next wave, or realtime after its waves) would
// merge nothing, send its repair an empty value and every chunk as lost.
func (m *chunked) revalue() {
	atts := m.res.Attempts
	coerce := Coercer(m.lim.Coerce)
	for i := range atts {
		a := &atts[i]
		if len(a.Value) > 0 || a.Raw == "" || !a.Valid {
			continue
		}
		schema := m.job.Schema
		if a.Step == fixpoint.StepChunk {
			schema = m.check
		}
		if b, ok := checkedValue(schema, a.Raw, coerce); ok {
			a.Value = b
		}
	}
	for i := range atts {
		if a := &atts[i]; a.Step == fixpoint.StepMerge && len(a.Value) == 0 {
			a.Value = m.remerge(atts[:i])
		}
	}
}

// checkedValue is the value the reply text gives under schema, as a step
// records it on its attempt.
func checkedValue(schema *validate.Schema, text string, coerce validate.Coercer) (json.RawMessage, bool) {
	check := validate.CheckWith(schema, text, validate.CheckOptions{Coerce: coerce})
	if check.Value == nil && check.Source == "" {
		return nil, false
	}
	b, err := json.Marshal(check.Value)
	return b, err == nil
}

// remerge is the merged value of the chunk attempts before a merge
// attempt: the last valid value of each chunk, merged (parallel), or the
// value of the last chunk that ended valid (sequential); nil when there
// is none.
func (m *chunked) remerge(before []fixpoint.Attempt) json.RawMessage {
	last := map[int]json.RawMessage{}
	lastN := -1
	for _, a := range before {
		if a.Step == fixpoint.StepChunk && a.Chunk != nil && a.Valid && len(a.Value) > 0 {
			last[a.Chunk.N] = a.Value
			lastN = max(lastN, a.Chunk.N)
		}
	}
	if m.lim.Strategy == fixpoint.StrategySequential {
		return last[lastN]
	}
	var values []merge.ChunkValue
	for n := range m.chunks {
		if b, ok := last[n]; ok {
			if v, err := decodeValue(b); err == nil {
				values = append(values, merge.ChunkValue{Chunk: n, Value: v})
			}
		}
	}
	if len(values) == 0 {
		return nil
	}
	v, _, err := merge.Values(m.job.Schema, values, merge.Options{})
	if err != nil {
		return nil
	}
	b, _ := json.Marshal(v)
	return b
}
