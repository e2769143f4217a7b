package repair

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"
	"strings"

	json "github.com/segmentio/encoding/json"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/merge"
)

// A merge by a model (Limits.MergeModel, parallel only): when two or more
// chunks gave a value, the merge is a call to that model instead of the
// merge by rule (package merge). Its request holds the chunks' values,
// each with its part and code point range, between the merge markers,
// and the places where they disagree with the value the rule chose there,
// as hints; the document is not sent (the chunks read it). The rule
// deduplicates list items by key or by equal value and picks the value
// most chunks gave; a model can tell "Acme Corp." from "ACME
// Corporation" as one company, and a later chunk's correction from an
// earlier slip. The reply is checked as the merge by rule is: the full
// schema, the job's rules, the evidence graded against the whole
// document. A valid reply ends the job valid; one that breaks a check
// goes to the repair (on the job's model) as the merged value; a reply
// with no value (no JSON, a refusal, a cut-off reply, a call that failed
// for good) leaves the merge to the rule: a merge attempt with no call
// follows, and the repair starts from its value.

// mergeByModel is the merge call of a chunked job.
type mergeByModel struct {
	u *unit
	// conflicts are the merge by rule's, sent as hints and kept on the
	// call's attempt.
	conflicts []fixpoint.Conflict
	// fellBack: the reply gave no value, and the merged value the repair
	// starts from is the rule's.
	fellBack string
}

// MergeConflictsMax bounds the conflicts a merge request lists as hints:
// the values show the rest.
const MergeConflictsMax = 50

// startMergeCall starts the merge call when the job asks for one and two
// or more chunks gave a value; false leaves the merge to the rule.
// conflicts are the rule's over the same values.
func (m *chunked) startMergeCall(conflicts []fixpoint.Conflict) bool {
	if m.lim.MergeModel == "" || m.lim.Strategy != fixpoint.StrategyParallel {
		return false
	}
	values := m.chunkValues()
	if len(values) < 2 {
		return false
	}
	m.byModel = &mergeByModel{u: m.mergeUnit(values, conflicts, nil), conflicts: conflicts}
	return true
}

// chunkValues are the chunks' contributions, in chunk order.
func (m *chunked) chunkValues() []merge.ChunkValue {
	var values []merge.ChunkValue
	for _, u := range m.units {
		if v, ok := m.contribution(u); ok {
			values = append(values, merge.ChunkValue{Chunk: u.ref.N, Value: v})
		}
	}
	return values
}

// mergeUnit is the conversation of the merge call from its attempts so
// far: one reply, to the merge request, on the merge model, checked
// against the full schema with the job's rules and evidence. Its reply is
// the whole value, longer than any chunk's: its output limit is
// Limits.TruncationMaxTokens when that is above the job's.
func (m *chunked) mergeUnit(values []merge.ChunkValue, conflicts []fixpoint.Conflict, atts []fixpoint.Attempt) *unit {
	sub := m.job
	sub.Document = ""
	sub.Model = m.lim.MergeModel
	sub.MaxTokens = max(cmp.Or(sub.MaxTokens, fixpoint.MaxTokensDefault), m.lim.TruncationMaxTokens)
	sub.Limits = m.subLimits(fixpoint.StrategyConversation, 1)
	sub.Prompt, sub.Messages = withLead(sub.Prompt, sub.Messages, m.mergeLead(values, conflicts))
	step := m.subStep(&sub, atts, m.cfg)
	ended := convEnded(atts, 1) || len(atts) > 0 && atts[len(atts)-1].ProviderClass == fixpoint.ClassModelNotFound
	return &unit{step: step, kind: fixpoint.StepMerge, ended: ended}
}

// mergeModelMissing ends the merge call when the provider has no merge
// model, instead of making the job wait (act.Err, ErrModelNotFound): a
// driver stops the lane of the job's model on that error, which has the
// model, and every job of it would wait for a model it does not call.
// The merge is then by rule, as after any call that failed for good.
func (m *chunked) mergeModelMissing(u *unit, act *Action) {
	if m.byModel == nil || u != m.byModel.u || act.Err == nil || !errors.Is(act.Err, fixpoint.ErrModelNotFound) {
		return
	}
	u.step.Stop(fixpoint.StatusFailed, fixpoint.OutcomeProvider, act.Err.Error())
	*act = Action{}
}

// mergeLead is the merge request put before the task: the chunks'
// values, one line a chunk between the merge markers, the conflicts as
// hints, and what to reply.
func (m *chunked) mergeLead(values []merge.ChunkValue, conflicts []fixpoint.Conflict) string {
	var b strings.Builder
	fmt.Fprintf(&b, "A document too long for one request was read in %d parts, each apart, and each part's value extracted. These are the values of the %d parts that gave one, a line a part: its number, its code points in the document, and its value.\n",
		len(m.chunks), len(values))
	b.WriteString(fixpoint.MergeValuesOpen + "\n")
	for _, v := range values {
		c := m.chunks[v.Chunk]
		line, _ := json.Marshal(struct {
			Part  int `json:"part"`
			Start int `json:"start"`
			End   int `json:"end"`
			Value any `json:"value"`
		}{c.N + 1, c.Start, c.End, v.Value})
		b.Write(line)
		b.WriteByte('\n')
	}
	b.WriteString(fixpoint.MergeValuesClose + "\n")
	if len(conflicts) > 0 {
		b.WriteString("The parts disagree here (a JSON pointer into the merged value, each value with the parts that gave it, and the value a merge by rule would keep: the one most parts gave, or one its part's text holds):\n")
		for i, c := range conflicts {
			if i == MergeConflictsMax {
				fmt.Fprintf(&b, "- and %d more\n", len(conflicts)-i)
				break
			}
			b.WriteString(conflictLine(c))
		}
	}
	b.WriteString("Merge them into the one value of the whole document: every property any part gives; every list item of every part once (an item two parts give, written alike or not, is one item with the fields of both); where the parts disagree, the value the document most likely states. Never add a value no part gives. Reply with the merged JSON value only.\n\nThe task each part was read for:")
	return b.String()
}

// conflictLine is one conflict as the merge request lists it.
func conflictLine(c fixpoint.Conflict) string {
	var b strings.Builder
	b.WriteString("- " + cmp.Or(c.Path, "(the root)") + ": ")
	for i, v := range c.Values {
		if i > 0 {
			b.WriteString("; ")
		}
		parts := make([]string, 0, len(c.Chunks))
		if i < len(c.Chunks) {
			for _, n := range c.Chunks[i] {
				parts = append(parts, strconv.Itoa(n+1))
			}
		}
		word := "parts"
		if len(parts) == 1 {
			word = "part"
		}
		fmt.Fprintf(&b, "%s (%s %s)", v, word, strings.Join(parts, ", "))
	}
	fmt.Fprintf(&b, "; by rule: %s\n", c.Chosen)
	return b.String()
}

// stampMerge gives an attempt of the merge call the rule's conflicts.
func (m *chunked) stampMerge(u *unit, a *fixpoint.Attempt) {
	if m.byModel != nil && u == m.byModel.u {
		a.Conflicts = m.byModel.conflicts
	}
}

// afterMergeCall moves on once the merge call is over: a valid reply ends
// the job valid; a reply with a value the checks refuse is the merged
// value the repair starts from; with no value, the rule merges (the
// attempt fallback, read from an earlier run, or made now) and the repair
// starts from that. repairs are the repair's attempts of an earlier run.
func (m *chunked) afterMergeCall(fallback *fixpoint.Attempt, repairs []fixpoint.Attempt) {
	bm := m.byModel
	a := m.callAttempt()
	switch {
	case a == nil:
		// No attempt: the call was never made (the job stopped first).
		m.finishWith(bm.u, "")
		return
	case a.Valid || mergeReplyValue(a):
		m.resumeAfterMerge(*a, repairs)
	default:
		bm.fellBack = fmt.Sprintf("The merge by model %s gave no value (%s)", m.lim.MergeModel, cmp.Or(a.Class, "no reply"))
		if fallback != nil {
			m.remerge(fallback)
		} else {
			value, _, err := m.mergedValue()
			if err != nil || value == nil {
				m.finishWith(bm.u, "")
				return
			}
			fallback = m.mergeAttempt(value, bm.conflicts)
			m.res.Attempts = append(m.res.Attempts, *fallback)
		}
		m.resumeAfterMerge(*fallback, repairs)
	}
}

// callAttempt is the merge call's last attempt as the job records it.
func (m *chunked) callAttempt() *fixpoint.Attempt {
	for i := len(m.res.Attempts) - 1; i >= 0; i-- {
		if a := &m.res.Attempts[i]; a.Step == fixpoint.StepMerge && a.Called() {
			return a
		}
	}
	return nil
}

// mergeReplyValue reports whether a, the merge call's attempt, gave a
// value the repair can start from: one that broke a check, not a reply
// with no JSON, a refusal, a reply cut off or a failed call.
func mergeReplyValue(a *fixpoint.Attempt) bool {
	switch a.Class {
	case fixpoint.OutcomeTruncated, fixpoint.OutcomeRefusal, fixpoint.OutcomeProvider, string(fixpoint.ClassSyntax):
		return false
	}
	return len(a.Value) > 0
}

// fallbackNote says, in the repair's first request, that the value it
// corrects is the rule's because the merge call gave none; "" when not.
func (m *chunked) fallbackNote() string {
	if m.byModel == nil || m.byModel.fellBack == "" {
		return ""
	}
	return m.byModel.fellBack + ": the value below was merged from the parts' values by rule. "
}

// replayMergeCall rebuilds the merge call from the attempts of an earlier
// run, once the chunks are over: false when the job has no merge call
// recorded (the merge, if any, was by rule, or is still to be made).
// The call's reply was checked again from its text (revalue); a call in
// flight or failed transiently is sent again.
func (m *chunked) replayMergeCall(repairs []fixpoint.Attempt) bool {
	if m.lim.MergeModel == "" {
		return false
	}
	var calls []fixpoint.Attempt
	var fallback *fixpoint.Attempt
	for i := range m.res.Attempts {
		a := &m.res.Attempts[i]
		switch {
		case a.Step != fixpoint.StepMerge:
		case a.Called():
			calls = append(calls, *a)
		default:
			fallback = a
		}
	}
	if len(calls) == 0 {
		return false
	}
	// The rule's conflicts made again, not read from the rows: the
	// ledger's JSON of a conflict's values is not the merge's bytes, and
	// the request sent again must be the one sent.
	_, conflicts, _ := m.mergedValue()
	m.byModel = &mergeByModel{conflicts: conflicts}
	m.byModel.u = m.mergeUnit(m.chunkValues(), conflicts, calls)
	if m.byModel.u.ended {
		m.afterMergeCall(fallback, repairs)
	}
	return true
}
