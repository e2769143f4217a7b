package repair

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/chunk"
	"github.com/fixpoint-dev/fixpoint/evidence"
	"github.com/fixpoint-dev/fixpoint/validate"
)

// PartNote is the sentence the system prompt of a chunk's request ends
// with under smart validation (not Limits.Strict): the chunk's value is
// checked with required relaxed, and the model is told so, lest it fill
// a required property its part of the document does not hold.
const PartNote = "You are given one part of a longer document. Your value may leave out any property, required or not, that neither this part nor a value so far given with it states: the other parts are read in other requests. Never invent a value the text does not state."

// ItemNote follows PartNote under parallel, whose chunk's value is
// checked with its list items' required kept (validate.PartialItems).
const ItemNote = "An item of a list holds every property its schema requires: leave out an item this part does not show whole."

// chunked runs the parallel and sequential strategies: one conversation
// (a Step) per chunk, all at once or one after another; then the merge of
// the values of the chunks that ended valid (parallel) or the value the
// chunks built (sequential), checked against the full schema and the
// job's rules and evidence; then, when that value is not valid, a repair
// conversation over it. Each conversation is a Step of a sub-job: the
// chunked machine numbers their attempts job-wide, marks their step and
// chunk, and keeps the job's totals and budgets.
type chunked struct {
	cfg    Config
	job    Job
	lim    fixpoint.Limits
	chunks []chunk.Chunk
	// check is the schema a chunk's value is checked against: the
	// partial schema, or the full one under Strict.
	check       *validate.Schema
	chunkSystem *fixpoint.Prompt
	res         *fixpoint.Result
	start       time.Time

	units []*unit // by chunk number; sequential: up to the current one
	cur   int     // sequential: the current chunk
	// soFar is the sequential strategy's value so far: the value of the
	// last chunk that ended valid; nil before one has.
	soFar  any
	merged *fixpoint.Attempt // the merge attempt, once recorded
	repair *unit

	out     map[*fixpoint.Request]*unit // outstanding requests
	order   []*fixpoint.Request         // the same, in the order sent
	waitErr error
	halt    *halt
	done    bool

	// byModel is the merge call under Limits.MergeModel, once started.
	byModel *mergeByModel
}

// unit is one conversation of a chunked job: a chunk's, or the repair of
// the merged value.
type unit struct {
	step *Step
	kind fixpoint.StepKind
	ref  *fixpoint.ChunkRef // StepChunk only
	// text is what a StepChunk unit's calls read: its chunk, or the rest
	// of it a list pass reads; passes are a chunk's list passes (see
	// chunked_passes.go).
	text   string
	passes passChain
	// before is a sequential chunk's value so far, as it was given.
	before any
	// pending: its request is outstanding; waiting: its last call failed
	// transiently, and it sends again when the driver calls Next; ended:
	// its conversation is over.
	pending, waiting, ended bool
}

// halt is why a job stops sending new requests: it ends so once nothing
// is outstanding.
type halt struct {
	status fixpoint.Status
	class  string
	msg    string
}

// startChunked starts the parallel or sequential strategy, or continues
// it from prev.
func startChunked(job *Job, prev *fixpoint.Result, cfg Config) (Machine, error) {
	cfg = cfg.WithDefaults()
	m := &chunked{cfg: cfg, job: *job, start: cfg.NowFunc(), out: map[*fixpoint.Request]*unit{}}
	m.res = &fixpoint.Result{JobID: job.ID, StartedAt: m.start}
	if prev != nil {
		m.res, m.start = prev, prev.StartedAt
	}
	if err := m.setUp(); err != nil {
		return nil, err
	}
	m.replay()
	return m, nil
}

// setUp checks the job and splits its document.
func (m *chunked) setUp() error {
	job := &m.job
	m.lim = job.Limits.WithDefaults()
	if err := m.lim.Validate(); err != nil {
		return err
	}
	switch {
	case job.Schema == nil:
		return fmt.Errorf("%w: job %s has no compiled schema", fixpoint.ErrBadJob, job.ID)
	case job.Prompt == "" && len(job.Messages) == 0:
		return fmt.Errorf("%w: job %s has no prompt", fixpoint.ErrBadJob, job.ID)
	case job.Document == "":
		return fmt.Errorf("%w: job %s has no document: strategy %s extracts from the chunks of a document (a document field or file at enqueue)", fixpoint.ErrBadJob, job.ID, m.lim.Strategy)
	}
	if job.Mode == "" {
		job.Mode = fixpoint.ModePrompt
	}
	if err := m.lim.ValidateMode(job.Mode); err != nil {
		return err
	}
	chunks, err := chunk.Split(job.Document, chunk.Options{Tokens: m.lim.ChunkTokens, Overlap: m.lim.ChunkOverlap})
	if err != nil {
		return fmt.Errorf("%w: job %s: split the document into chunks of %d tokens: %w", fixpoint.ErrBadJob, job.ID, m.lim.ChunkTokens, err)
	}
	if len(chunks) == 0 {
		return fmt.Errorf("%w: job %s: the document has no text to split", fixpoint.ErrBadJob, job.ID)
	}
	m.chunks = chunks
	m.check = job.Schema
	system := m.cfg.SystemFunc(job).Text()
	if !m.lim.Strict {
		// A parallel chunk's list items are the ones its text holds,
		// with their fields (validate.PartialItems); a sequential
		// reply writes back every item the chunks before it read,
		// whose fields this chunk's text does not hold.
		partial, note := job.Schema.Partial, PartNote
		if m.lim.Strategy == fixpoint.StrategyParallel {
			partial, note = job.Schema.PartialItems, PartNote+" "+ItemNote
		}
		if m.check, err = partial(); err != nil {
			return fmt.Errorf("%w: job %s: the schema with required relaxed, for checking a chunk's value: %w", fixpoint.ErrBadJob, job.ID, err)
		}
		system += "\n\n" + note
	}
	m.chunkSystem = fixpoint.NewPrompt(system)
	return nil
}

// replay rebuilds the machine from the attempts of an earlier run: each
// chunk's conversation from its attempts (a chunk that ended is not asked
// again), the merge attempt, and the repair conversation.
func (m *chunked) replay() {
	m.revalue()
	m.numberPasses()
	byChunk := map[int][]fixpoint.Attempt{}
	var mergeAt *fixpoint.Attempt
	var repairs []fixpoint.Attempt
	for i := range m.res.Attempts {
		a := m.res.Attempts[i]
		switch {
		case a.Step == fixpoint.StepChunk && a.Chunk != nil:
			byChunk[a.Chunk.N] = append(byChunk[a.Chunk.N], a)
		case a.Step == fixpoint.StepMerge:
			mergeAt = &m.res.Attempts[i]
		case a.Step == fixpoint.StepRepair:
			repairs = append(repairs, a)
		}
	}
	for n := range m.chunks {
		own, passes := passRows(byChunk[n])
		u := m.chunkUnit(n, own)
		m.units = append(m.units, u)
		if !m.replayPasses(u, passes) && m.lim.Strategy == fixpoint.StrategySequential {
			break
		}
		m.cur = n + 1
	}
	m.addPasses()
	if !m.chunksEnded() || m.replayMergeCall(repairs) {
		return
	}
	if mergeAt == nil {
		m.afterChunks()
		return
	}
	m.remerge(mergeAt)
	m.resumeAfterMerge(*mergeAt, repairs)
}

// resumeAfterMerge goes on from a, the merged value's attempt (a copy):
// the job ends valid on it, or the repair of its value starts, or goes on
// from repairs, the repair's attempts of an earlier run.
func (m *chunked) resumeAfterMerge(a fixpoint.Attempt, repairs []fixpoint.Attempt) {
	m.merged = &a
	if a.Valid {
		m.finishValid(a.Value)
		return
	}
	m.startRepair(repairs)
	if m.repair.ended {
		m.finishRepair()
	}
}

// chunksEnded reports whether every chunk's conversation is over.
func (m *chunked) chunksEnded() bool {
	if len(m.units) < len(m.chunks) {
		return false
	}
	for _, u := range m.units {
		if !u.chainEnded() {
			return false
		}
	}
	return true
}

// chunkUnit starts the conversation of chunk n from its attempts so far.
func (m *chunked) chunkUnit(n int, atts []fixpoint.Attempt) *unit {
	c := m.chunks[n]
	u := m.readUnit(&fixpoint.ChunkRef{N: n, Start: c.Start, End: c.End}, c.Text, atts)
	if m.lim.Strategy == fixpoint.StrategySequential {
		u.before = m.soFar
	}
	return u
}

// readUnit starts the conversation over text, a chunk or the rest of it
// a list pass reads (ref), from its attempts so far.
func (m *chunked) readUnit(ref *fixpoint.ChunkRef, text string, atts []fixpoint.Attempt) *unit {
	sub := m.job
	sub.Document = text
	sub.Schema = m.check
	sub.Limits = m.subLimits(fixpoint.StrategyConversation, m.lim.MaxAttempts)
	// A rule may read properties that different chunks give: rules run on
	// the merged value only. The evidence stage, when it grades against
	// the document, grades a parallel chunk's value against the chunk, so
	// that a value the chunk does not hold (an invention, which smart
	// validation lets through) goes back at once; its spans are shifted
	// into the document (see Feed). A sequential chunk's value holds the
	// value so far too, which other chunks ground: it is graded against
	// the document.
	sub.Rules = nil
	switch {
	case m.chunkEvidence() && m.lim.Strategy == fixpoint.StrategyParallel:
		sub.Source = evidence.New(text)
	case m.chunkEvidence():
	default:
		sub.Evidence, sub.Source, sub.Exempt = fixpoint.EvidenceOff, nil, nil
	}
	lead := m.partLine(ref)
	if m.lim.Strategy == fixpoint.StrategySequential {
		lead = m.sequentialLead(ref)
	}
	sub.Prompt, sub.Messages = withLead(sub.Prompt, sub.Messages, lead)
	cfg := m.cfg
	cfg.SystemFunc = func(*Job) *fixpoint.Prompt { return m.chunkSystem }
	step := m.subStep(&sub, atts, cfg)
	step.docNote = fmt.Sprintf("[%s of the job's document, code points %d to %d, %d bytes: the document is stored once in the ledger's documents, under the job's document_hash]",
		m.partName(ref), ref.Start, ref.End, len(text))
	return &unit{step: step, kind: fixpoint.StepChunk, ref: ref, text: text, ended: convEnded(atts, m.lim.MaxAttempts)}
}

// chunkEvidence reports whether a chunk's value is graded against its
// chunk: the job's evidence stage is on and grades against the document.
func (m *chunked) chunkEvidence() bool {
	return m.job.Checks().evidenceOn() && m.job.Source.Text() == m.job.Document
}

// subLimits are the limits of a sub-job's Step: the job's, but its
// budgets, which the chunked machine keeps job-wide.
func (m *chunked) subLimits(strategy fixpoint.Strategy, attempts int) fixpoint.Limits {
	return fixpoint.Limits{MaxAttempts: attempts, Strategy: strategy, Feedback: m.lim.Feedback,
		Coerce: m.lim.Coerce, TruncationMaxTokens: m.lim.TruncationMaxTokens}
}

// subStep starts a sub-job's Step from its attempts so far. The sub-job
// is the job's, checked by setUp, so Start cannot refuse it.
func (m *chunked) subStep(sub *Job, atts []fixpoint.Attempt, cfg Config) *Step {
	prev := &fixpoint.Result{JobID: sub.ID, StartedAt: m.start, Attempts: slices.Clone(atts)}
	step, err := Start(sub, prev, cfg)
	if err != nil {
		panic(fmt.Sprintf("repair: start a sub-job of checked job %s: %v", sub.ID, err))
	}
	return step
}

// partLine says which part of the document a chunk's request holds, or
// a list pass's.
func (m *chunked) partLine(ref *fixpoint.ChunkRef) string {
	line := fmt.Sprintf("The document above is %s of the whole document (its code points %d to %d)", m.partName(ref), ref.Start, ref.End)
	if ref.Pass > 0 {
		return line + ", after the items already read from that part: an earlier request read the part up to the first item above."
	}
	return line + "."
}

// sequentialLead is the part line of a sequential request, with the value
// so far between the value markers (none before the first chunk that
// ended valid) and what to do with it.
func (m *chunked) sequentialLead(ref *fixpoint.ChunkRef) string {
	line := m.partLine(ref)
	if m.soFar == nil {
		return line + " The parts after it are read in later requests, each given the value so far. Reply with the value this part gives."
	}
	b, _ := json.Marshal(m.soFar)
	return line + " The value so far, built from the parts before it:\n" + fixpoint.ValueSoFarOpen + "\n" + string(b) + "\n" + fixpoint.ValueSoFarClose +
		"\nReply with the whole value: the value so far, extended with what this part adds and corrected where this part says otherwise."
}

// withLead puts lead before the text of the task's first user message.
func withLead(prompt string, msgs []fixpoint.Message, lead string) (string, []fixpoint.Message) {
	if len(msgs) == 0 {
		return lead + "\n\n" + prompt, nil
	}
	out := slices.Clone(msgs)
	for i := range out {
		if out[i].Role == fixpoint.RoleUser {
			out[i].Content = lead + "\n\n" + out[i].Content
			break
		}
	}
	return prompt, out
}

// convEnded reports whether a conversation with these attempts is over:
// one was valid, the replies reached max, the last reply got no feedback
// (the step ended on it), or the last call failed for good. A call that
// failed transiently, or was in flight, is made again.
func convEnded(atts []fixpoint.Attempt, max int) bool {
	if len(atts) == 0 {
		return false
	}
	replies := 0
	for i := range atts {
		if atts[i].Valid {
			return true
		}
		if countsAsReply(&atts[i]) {
			replies++
		}
	}
	if replies >= max {
		return true
	}
	last := atts[len(atts)-1]
	if last.Class != fixpoint.OutcomeProvider {
		return last.Feedback == ""
	}
	switch c := last.ProviderClass; {
	case last.ProviderStatus >= 200 && last.ProviderStatus <= 299:
		return c == fixpoint.ClassTooLarge
	case c == "", c == fixpoint.ClassInFlight, c == fixpoint.ClassQuotaExhausted, c == fixpoint.ClassModelNotFound,
		c == fixpoint.ClassAuth && last.ProviderStatus == 401:
		return false
	default:
		return !c.Retryable()
	}
}
