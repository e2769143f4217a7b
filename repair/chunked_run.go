package repair

import (
	"fmt"
	"slices"
	"strings"
	"time"

	json "github.com/segmentio/encoding/json"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/validate"
)

// Next returns the new requests, Waiting while only outstanding ones are
// left, the transient failure to wait out, or done. A driver that calls
// it after a transient failure has waited: the failed calls go again.
func (m *chunked) Next() DocAction {
	if m.waitErr != nil {
		m.waitErr = nil
		for _, u := range m.live() {
			u.waiting = false
		}
	}
	return m.advance()
}

// Feed records the outcome of req in the conversation that sent it, and
// says what comes next.
func (m *chunked) Feed(req *fixpoint.Request, resp *fixpoint.Response, err error, started time.Time) (*fixpoint.Attempt, DocAction) {
	u := m.out[req]
	if u == nil {
		panic("repair: Feed of a request that is not outstanding")
	}
	m.forget(req)
	sa, act := u.step.Feed(resp, err, started)
	m.mergeModelMissing(u, &act)
	a := *sa
	m.stamp(u, &a, 0)
	if u.ref != nil && len(a.Evidence) > 0 && m.lim.Strategy == fixpoint.StrategyParallel {
		// Graded against the chunk: spans into the document.
		a.Evidence = slices.Clone(a.Evidence)
		for i := range a.Evidence {
			if a.Evidence[i].Grade != fixpoint.GradeNone {
				a.Evidence[i].Start += u.ref.Start
				a.Evidence[i].End += u.ref.Start
			}
		}
	}
	m.res.Attempts = append(m.res.Attempts, a)
	m.settle()
	if m.lim.RetryBudget > 0 && m.res.TransportRetries > m.lim.RetryBudget && m.halt == nil {
		m.halt = &halt{status: fixpoint.StatusFailed, class: fixpoint.OutcomeProvider,
			msg: fmt.Sprintf("transport retry budget %d exceeded (%d retries)", m.lim.RetryBudget, m.res.TransportRetries)}
	}
	switch {
	case act.Err != nil:
		u.waiting = true
		m.waitErr = act.Err
		m.res.Status, m.res.Class, m.res.Error = fixpoint.StatusFailed, fixpoint.OutcomeProvider, a.ProviderError
		return &a, DocAction{Err: act.Err}
	case act.Request != nil:
		if m.take(u, act.Request) {
			return &a, DocAction{Requests: []*fixpoint.Request{act.Request}}
		}
	default:
		u.ended = true
	}
	return &a, m.advance()
}

// Outstanding is the attempt req records should its reply never be fed.
// Outstanding requests are numbered after the attempts recorded, in the
// order they were sent.
func (m *chunked) Outstanding(req *fixpoint.Request, at time.Time) *fixpoint.Attempt {
	u := m.out[req]
	if u == nil {
		return nil
	}
	// The sub-step's outstanding request is req: a unit has one at a time.
	a := u.step.Outstanding(at)
	if a == nil {
		return nil
	}
	m.stamp(u, a, slices.Index(m.order, req))
	return a
}

// Stop ends the job now; outstanding requests are dropped.
func (m *chunked) Stop(status fixpoint.Status, class, msg string) {
	m.out, m.order, m.waitErr = map[*fixpoint.Request]*unit{}, nil, nil
	m.res.Status, m.res.Class, m.res.Error = status, class, msg
	m.done = true
	m.settle()
}

// Result is the job's result so far.
func (m *chunked) Result() *fixpoint.Result {
	m.settle()
	return m.res
}

// stamp gives a, an attempt of u's conversation, its job-wide number
// (after the attempts recorded, plus skip for an outstanding one), its
// step and its chunk.
func (m *chunked) stamp(u *unit, a *fixpoint.Attempt, skip int) {
	a.No = len(m.res.Attempts) + 1 + skip
	a.Step = u.kind
	if u.ref != nil {
		ref := *u.ref
		a.Chunk = &ref
	}
	m.stampMerge(u, a)
}

// forget drops req from the outstanding requests.
func (m *chunked) forget(req *fixpoint.Request) {
	if u := m.out[req]; u != nil {
		u.pending = false
	}
	delete(m.out, req)
	if i := slices.Index(m.order, req); i >= 0 {
		m.order = slices.Delete(m.order, i, i+1)
	}
}

// take makes req, u's next request, outstanding, unless the job has
// stopped sending or the token budget would be crossed with the requests
// already out (then u's conversation ends, and the job once nothing is
// outstanding).
func (m *chunked) take(u *unit, req *fixpoint.Request) bool {
	if m.halt == nil && m.lim.TokenBudget > 0 {
		spent := m.res.TokensIn + m.res.TokensOut
		for _, r := range m.order {
			spent += EstimateTokens(r)
		}
		if need := EstimateTokens(req); spent+need > m.lim.TokenBudget {
			m.halt = &halt{status: fixpoint.StatusFailed, class: fixpoint.OutcomeBudget,
				msg: fmt.Sprintf("token budget %d would be exceeded: %d spent or outstanding, next attempt needs about %d", m.lim.TokenBudget, spent, need)}
		}
	}
	if m.halt != nil {
		u.step.Stop(m.halt.status, m.halt.class, m.halt.msg)
		u.ended = true
		return false
	}
	u.pending = true
	m.out[req] = u
	m.order = append(m.order, req)
	return true
}

// live are the conversations of the phase the job is in.
func (m *chunked) live() []*unit {
	switch {
	case m.repair != nil:
		return []*unit{m.repair}
	case m.byModel != nil:
		return []*unit{m.byModel.u}
	case m.lim.Strategy == fixpoint.StrategySequential:
		if m.cur < len(m.units) {
			return []*unit{m.units[m.cur].tail()}
		}
		return nil
	}
	return m.readers()
}

// advance asks the live conversations for their next requests; when all
// are over, it moves to the next phase: the next chunk (sequential), the
// merge, the repair, the end.
func (m *chunked) advance() DocAction {
	for !m.done {
		m.addPasses()
		var reqs []*fixpoint.Request
		for _, u := range m.live() {
			if u.ended || u.pending || u.waiting {
				continue
			}
			if m.halt != nil {
				u.step.Stop(m.halt.status, m.halt.class, m.halt.msg)
				u.ended = true
				continue
			}
			act := u.step.Next()
			if act.Request == nil {
				u.ended = true
				continue
			}
			if m.take(u, act.Request) {
				reqs = append(reqs, act.Request)
			}
		}
		switch {
		case len(reqs) > 0:
			return DocAction{Requests: reqs}
		case m.addPasses():
			continue
		case len(m.out) > 0:
			return DocAction{Waiting: true}
		case m.waitErr != nil:
			return DocAction{Err: m.waitErr}
		case m.halt != nil:
			m.Stop(m.halt.status, m.halt.class, m.halt.msg)
			return DocAction{}
		}
		m.nextPhase()
	}
	return DocAction{}
}

// nextPhase moves on once the live conversations are over.
func (m *chunked) nextPhase() {
	switch {
	case m.repair != nil:
		m.finishRepair()
	case m.byModel != nil:
		m.afterMergeCall(nil, nil)
	case m.lim.Strategy == fixpoint.StrategySequential && m.cur < len(m.chunks):
		m.fold(m.units[m.cur].tail())
		if m.nextPass(m.units[m.cur]) {
			return
		}
		m.cur++
		if m.cur < len(m.chunks) {
			m.units = append(m.units, m.chunkUnit(m.cur, nil))
			return
		}
		m.afterChunks()
	default:
		m.afterChunks()
	}
}

// fold makes the value of u, a sequential chunk that ended, the value so
// far when it ended valid: a step that stays invalid keeps the value so
// far, and the next chunk goes on from it.
func (m *chunked) fold(u *unit) {
	if b, ok := u.value(); ok {
		if v, err := decodeValue(b); err == nil {
			m.soFar = v
		}
	}
}

// value is the value of u's valid attempt, if it has one. It reads the
// attempts, not the sub-step's status: a conversation replayed from an
// earlier run's attempts has none.
func (u *unit) value() (json.RawMessage, bool) {
	atts := u.step.res.Attempts
	for i := len(atts) - 1; i >= 0; i-- {
		if atts[i].Valid {
			return atts[i].Value, true
		}
	}
	return nil, false
}

// last is u's last attempt, nil when it has none.
func (u *unit) last() *fixpoint.Attempt {
	atts := u.step.res.Attempts
	if len(atts) == 0 {
		return nil
	}
	return &atts[len(atts)-1]
}

// afterChunks merges the values of the chunks that ended valid (parallel)
// or takes the value they built (sequential), records the merge attempt
// and ends the job, or starts the repair of the value.
func (m *chunked) afterChunks() {
	value, conflicts, err := m.mergedValue()
	if err != nil {
		m.Stop(fixpoint.StatusInvalid, string(fixpoint.ClassSemantic), err.Error())
		return
	}
	if value == nil {
		m.finishNoValue()
		return
	}
	if m.startMergeCall(conflicts) {
		return
	}
	a := m.mergeAttempt(value, conflicts)
	m.res.Attempts = append(m.res.Attempts, *a)
	m.merged = a
	if a.Valid {
		m.finishValid(a.Value)
		return
	}
	m.startRepair(nil)
}

// mergeAttempt is the attempt that records value, the chunks' merged
// value: no call (no request, no tokens, no cost), the conflicts, and the
// errors of the full schema and, on a value it takes, of the job's rules
// and evidence, graded against the whole document.
func (m *chunked) mergeAttempt(value any, conflicts []fixpoint.Conflict) *fixpoint.Attempt {
	a := &fixpoint.Attempt{No: len(m.res.Attempts) + 1, Step: fixpoint.StepMerge, StartedAt: m.cfg.NowFunc(),
		PriceBasis: m.cfg.PriceBasis, Conflicts: conflicts}
	b, _ := json.Marshal(value)
	a.Value = b
	errs := validate.Check(m.job.Schema, string(b)).Errors
	if len(errs) == 0 {
		t := m.job.Checks().Check(value)
		a.Warnings, a.Evidence = t.Warnings, t.Evidence
		errs = t.Errors
	}
	a.Errors = keepErrors(errs)
	a.Valid = len(errs) == 0
	if !a.Valid {
		a.Class = string(validate.ClassOf(errs))
	}
	return a
}

// startRepair starts the repair conversation of the merged value, from
// its attempts so far. Its first request is the repair strategy's: the
// task, the merged value as the reply to correct, and its errors; its
// document block holds the chunks the errors need (see repairParts).
func (m *chunked) startRepair(atts []fixpoint.Attempt) {
	mg := m.merged
	sub := m.job
	sub.Document = ""
	// The merged value stands as one reply that was not accepted: it
	// counts as one of the sub-step's replies, so MaxAttempts more go.
	seed := fixpoint.Attempt{Raw: string(mg.Value), Class: mg.Class, Errors: mg.Errors}
	// A merged value that breaks the schema in a few places (a shape or
	// semantic error) is corrected by a JSON Patch of those places: the
	// value holds hundreds of list items, and a whole rewrite paid for
	// them all again in output tokens. Other errors (evidence, syntax)
	// are re-asked whole, as the repair strategy does, and so is every
	// value under EvidenceRequire: a patched value that then fails on
	// evidence gets a whole re-ask showing the schema's old errors, and
	// on the 200-document bench the patch route ended half the documents
	// invalid there.
	strategy := fixpoint.StrategyRepair
	seed.Feedback = m.mergedFeedback(mg)
	if hasValue(mg) && m.job.Evidence != fixpoint.EvidenceRequire {
		strategy = fixpoint.StrategyPatch
		seed.Feedback = m.mergedPatchRequest(mg)
	}
	sub.Limits = m.subLimits(strategy, m.lim.MaxAttempts+1)
	value, _ := decodeValue(mg.Value)
	parts, whole := m.repairParts(value, mg.Errors)
	doc, names := m.partsText(parts)
	switch {
	case whole:
		sub.Document = m.job.Document
	case len(parts) > 0:
		sub.Document = doc
		lead := fmt.Sprintf("The document above is not the whole document: it holds only %s of %d, the parts the errors below need.", names, len(m.chunks))
		sub.Prompt, sub.Messages = withLead(sub.Prompt, sub.Messages, lead)
	}
	atts = append([]fixpoint.Attempt{seed}, atts...)
	step := m.subStep(&sub, atts, m.cfg)
	if !whole && len(parts) > 0 {
		step.docNote = fmt.Sprintf("[%s of the job's document, %d bytes: the document is stored once in the ledger's documents, under the job's document_hash]", names, len(doc))
	}
	m.repair = &unit{step: step, kind: fixpoint.StepRepair, ended: convEnded(atts, m.lim.MaxAttempts+1)}
}

// mergedPatchRequest is the patch request of a merged value: the patch
// strategy's, saying where the value comes from instead of calling it a
// previous reply.
func (m *chunked) mergedPatchRequest(a *fixpoint.Attempt) string {
	from := fmt.Sprintf("This JSON value was merged from the values extracted from the %d parts of the document, each read apart:", len(m.chunks))
	if m.lim.Strategy == fixpoint.StrategySequential {
		from = fmt.Sprintf("This JSON value was built by reading the %d parts of the document in order:", len(m.chunks))
	}
	return strings.Replace(patchRequest(m.lim.Feedback, a.Value, a.Errors), "Your previous reply gave this JSON value:", m.fallbackNote()+from, 1)
}

// mergedFeedback is the correction of the merged value: where it comes
// from, then the errors as feedback writes them.
func (m *chunked) mergedFeedback(a *fixpoint.Attempt) string {
	from := fmt.Sprintf("That value was merged from the values extracted from the %d parts of the document, each read apart.", len(m.chunks))
	if m.lim.Strategy == fixpoint.StrategySequential {
		from = fmt.Sprintf("That value was built by reading the %d parts of the document in order.", len(m.chunks))
	}
	// feedback speaks of a reply; this value is none.
	fb := strings.NewReplacer("Your reply did not match", "It does not match",
		"Your reply states values the source does not hold", "It states values the document does not hold").Replace(feedback(m.lim.Feedback, a, true))
	return m.fallbackNote() + from + " " + fb
}

// finishValid ends the job valid with value.
func (m *chunked) finishValid(value json.RawMessage) {
	res := m.res
	res.Status, res.Class, res.Error, res.Value = fixpoint.StatusValid, "", "", value
	res.FirstAttemptValid = true
	for _, a := range res.Attempts {
		if a.Step == fixpoint.StepChunk && !a.Valid || a.Step == fixpoint.StepRepair {
			res.FirstAttemptValid = false
		}
		res.RepairedLocally = res.RepairedLocally || a.RepairedLocally
	}
	res.RepairedLocally = res.RepairedLocally && res.FirstAttemptValid
	m.done = true
	m.settle()
}

// finishRepair ends the job as its repair conversation ended.
func (m *chunked) finishRepair() {
	if b, ok := m.repair.value(); ok {
		m.finishValid(b)
		return
	}
	m.finishWith(m.repair, "")
}

// finishNoValue ends a job no chunk of which ended valid: failed when
// every chunk's last call failed, else invalid, with the last chunk's
// reason.
func (m *chunked) finishNoValue() {
	failed := true
	for _, u := range m.units {
		if a := u.last(); a == nil || a.Class != fixpoint.OutcomeProvider {
			failed = false
		}
	}
	m.finishWith(m.units[len(m.units)-1], fmt.Sprintf("no chunk of %d gave a valid value; the last: ", len(m.chunks)))
	if !failed && m.res.Status == fixpoint.StatusFailed {
		m.res.Status = fixpoint.StatusInvalid
	}
}

// finishWith ends the job on u's last attempt, which is not valid: failed
// on a provider error, else invalid, with the attempt's class and error
// after lead.
func (m *chunked) finishWith(u *unit, lead string) {
	res := m.res
	res.Status, res.Class, res.Error = fixpoint.StatusInvalid, "", lead+"no attempt"
	if a := u.last(); a != nil {
		res.Class, res.Error = a.Class, lead+attemptError(a)
		if a.Class == fixpoint.OutcomeProvider {
			res.Status, res.Error = fixpoint.StatusFailed, lead+a.ProviderError
		}
	}
	if sub := u.step.res; sub.Status == fixpoint.StatusFailed && sub.Class != fixpoint.OutcomeProvider {
		// The sub-step stopped on a budget: its reason stands.
		res.Status, res.Class, res.Error = sub.Status, sub.Class, lead+sub.Error
	}
	m.done = true
	m.settle()
}

// settle brings the job's totals up to date: every attempt's tokens and
// cost, and a call for each attempt but a merge by rule.
func (m *chunked) settle() {
	r := m.res
	r.Calls, r.TransportRetries, r.CostUSD = 0, 0, 0
	r.TokensIn, r.TokensOut, r.TokensCached, r.TokensCacheWrite = 0, 0, 0, 0
	for i := range r.Attempts {
		a := &r.Attempts[i]
		if a.Called() {
			r.Calls++
		}
		r.TransportRetries += len(a.Retries)
		r.TokensIn += a.TokensIn
		r.TokensOut += a.TokensOut
		r.TokensCached += a.TokensCached
		r.TokensCacheWrite += a.TokensCacheWrite
		r.CostUSD += a.CostUSD
	}
	r.Wall = m.cfg.NowFunc().Sub(m.start)
}
