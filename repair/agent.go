package repair

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/chunk"
	"github.com/fixpoint-dev/fixpoint/validate"
)

// The agent strategy (fixpoint.StrategyAgent) lets the model build the
// job's value through tools over the document (see docs/agent.md): it
// reads chunks and searches the text, sets and updates the value, and
// finishes (the value checked against the full schema and the job's
// checks) or fails. Each reply is one turn, one attempt with
// Step fixpoint.StepAgent; the tools run here, with no I/O, and their
// results go back as the next request's tool turns.
//
// The state of a run (the value, the conversation, the counts of nudges
// and refused finishes) is a function of the job and the replies: a run
// continued from its attempts replays their tool calls (agent.replay), so
// the ledger need not keep the tools' results.

// AgentTurnsMax is the most turns an agent run of a document cut into
// chunks chunks may take: three a chunk (enough to read every chunk twice,
// a second pass after a refused finish, and fix one refused call for
// each), plus the refused finishes and the nudges the limits allow, plus
// four (the first turn, the finishes of two passes, one spare). Past it
// the job ends invalid.
func AgentTurnsMax(chunks int, lim fixpoint.Limits) int {
	if lim.MaxValidationAttempts == 0 {
		lim.MaxValidationAttempts = fixpoint.ValidationAttemptsDefault
	}
	return 3*chunks + lim.MaxValidationAttempts + fixpoint.NudgesMax + 4
}

// agent is the agent strategy's Machine. At most one request is
// outstanding: a turn needs the results of the one before.
type agent struct {
	step    *Step // the job, limits, config and result, and their recording
	chunks  []chunk.Chunk
	partial *validate.Schema // set_output's and update_output's check
	keyed   []keyedList      // the schema's keyed lists
	tools   []fixpoint.Tool

	messages []fixpoint.Message // the conversation after the system prompt
	value    any                // the output so far; nil until set
	hasValue bool
	nudges   int // text answers nudged back since the last tool call
	refused  int // finishes refused
	turns    int // attempts that got a reply
	maxTurns int

	pending *fixpoint.Request
	waitErr error
	done    bool
}

var _ Machine = (*agent)(nil)

// startAgent starts the agent strategy, or continues it from prev.
func startAgent(job *Job, prev *fixpoint.Result, cfg Config) (Machine, error) {
	cfg = cfg.WithDefaults()
	lim := job.Limits.WithDefaults()
	if err := lim.Validate(); err != nil {
		return nil, err
	}
	if job.Schema == nil {
		return nil, fmt.Errorf("%w: job %s has no compiled schema", fixpoint.ErrBadJob, job.ID)
	}
	if job.Document == "" {
		return nil, fmt.Errorf("%w: job %s: strategy agent needs a document", fixpoint.ErrBadJob, job.ID)
	}
	if job.Prompt == "" && len(job.Messages) == 0 {
		return nil, fmt.Errorf("%w: job %s has no prompt", fixpoint.ErrBadJob, job.ID)
	}
	if err := objectRoot(job.SchemaRaw); err != nil {
		return nil, fmt.Errorf("%w: job %s: strategy agent: %w", fixpoint.ErrBadJob, job.ID, err)
	}
	j := *job
	if j.Mode == "" {
		j.Mode = fixpoint.ModePrompt
	}
	if err := lim.ValidateMode(j.Mode); err != nil {
		return nil, err
	}
	chunks, err := chunk.Split(j.Document, chunk.Options{Tokens: lim.ChunkTokens, Overlap: lim.ChunkOverlap})
	if err != nil {
		return nil, fmt.Errorf("%w: job %s: split the document: %w", fixpoint.ErrBadJob, j.ID, err)
	}
	partial := j.Schema
	if !lim.Strict {
		if partial, err = j.Schema.Partial(); err != nil {
			return nil, fmt.Errorf("%w: job %s: partial schema: %w", fixpoint.ErrBadJob, j.ID, err)
		}
	}
	s := &Step{cfg: cfg, job: j, lim: lim, start: cfg.NowFunc()}
	s.res = &fixpoint.Result{JobID: j.ID, StartedAt: s.start}
	if prev != nil {
		s.res, s.start = prev, prev.StartedAt
	}
	s.maxTokens = j.MaxTokens
	if s.maxTokens == 0 {
		s.maxTokens = fixpoint.MaxTokensDefault
	}
	s.system = fixpoint.NewPrompt(agentSystemPrompt(&j))
	m := &agent{step: s, chunks: chunks, partial: partial, keyed: keyedLists(j.SchemaRaw), maxTurns: AgentTurnsMax(len(chunks), lim)}
	m.tools = agentTools(&j, partial)
	m.messages = agentFirstMessages(&j, chunks)
	m.replay()
	return m, nil
}

// objectRoot says why a schema's value cannot be an agent's output, nil
// when it can: set_output's arguments are the value, and a tool call's
// arguments are a JSON object.
func objectRoot(raw []byte) error {
	var root struct {
		Type any `json:"type"`
	}
	if json.Unmarshal(raw, &root) != nil {
		return nil // the compiled schema is the judge of its own text
	}
	switch t := root.Type.(type) {
	case string:
		if t != "object" {
			return fmt.Errorf("the schema's value is of type %s, and set_output's arguments, the value, must be an object", t)
		}
	case []any:
		if !slices.Contains(t, any("object")) {
			return fmt.Errorf("the schema's value is of types %v, none an object, and set_output's arguments, the value, must be one", t)
		}
	}
	return nil
}

// replay brings the run to where the attempts of an earlier run left it:
// each reply's turn is run again (the tools are deterministic), and a run
// that ended is done.
func (m *agent) replay() {
	res := m.step.res
	for i := range res.Attempts {
		a := &res.Attempts[i]
		if a.Class == fixpoint.OutcomeProvider {
			// No reply to run (Raw may hold the first bytes of one that
			// could not be read: paid, and asked again).
			if countsAsReply(a) {
				m.turns++
			}
			continue
		}
		m.turns++
		out := m.runTurn(a.Raw, a.ToolCalls, a.FinishReason)
		m.messages = append(m.messages, out.messages...)
		if out.end != nil {
			m.done = true
		}
	}
}

// Next returns the next turn's request, Waiting while one is outstanding,
// or done.
func (m *agent) Next() DocAction {
	s := m.step
	if m.pending != nil {
		return DocAction{Waiting: true}
	}
	m.waitErr = nil
	if m.done {
		return DocAction{}
	}
	if m.turns >= m.maxTurns {
		m.end(fixpoint.StatusInvalid, m.limitClass(), fmt.Sprintf("the agent made %d turns, its limit for %d chunks, without finishing", m.turns, len(m.chunks)))
		return DocAction{}
	}
	req := &fixpoint.Request{
		Model:       s.job.Model,
		System:      s.system.Text(),
		Messages:    agentElide(m.messages, m.chunks),
		Mode:        s.job.Mode,
		Temperature: s.job.Temperature,
		MaxTokens:   s.maxTokens,
		User:        fixpoint.RequestUser(s.job.ID, s.job.Run),
		Tools:       m.tools,
		ToolChoice:  fixpoint.ToolChoice{Required: m.nudges > 0},
	}
	if s.job.CacheKey != "" {
		req.CacheKey, req.CacheSystem = s.job.CacheKey, true
	}
	s.askTier(req)
	if s.lim.TokenBudget > 0 {
		spent := s.res.TokensIn + s.res.TokensOut
		if need := EstimateTokens(req); spent+need > s.lim.TokenBudget {
			m.end(fixpoint.StatusFailed, fixpoint.OutcomeBudget, fmt.Sprintf("token budget %d would be exceeded: %d spent, next turn needs about %d", s.lim.TokenBudget, spent, need))
			return DocAction{}
		}
	}
	m.pending = req
	return DocAction{Requests: []*fixpoint.Request{req}}
}

// limitClass is the class of a run that ended without finishing: that of
// the value's errors under the full schema, shape when it has none (or
// no value was set).
func (m *agent) limitClass() string {
	if !m.hasValue {
		return string(fixpoint.ClassShape)
	}
	if errs := m.step.job.Schema.Validate(m.value); len(errs) > 0 {
		return string(validate.ClassOf(errs))
	}
	return string(fixpoint.ClassShape)
}

// Feed records the reply to the outstanding request as one turn: its tool
// calls are run, their results (or a nudge) make the next request.
func (m *agent) Feed(req *fixpoint.Request, resp *fixpoint.Response, err error, started time.Time) (*fixpoint.Attempt, DocAction) {
	if req == nil || req != m.pending {
		panic("repair: agent Feed of a request that is not outstanding")
	}
	s := m.step
	m.pending = nil
	a := fixpoint.Attempt{No: len(s.res.Attempts) + 1, StartedAt: started, PriceBasis: s.cfg.PriceBasis, Step: fixpoint.StepAgent}
	s.recordRequest(&a, req)
	if err != nil || resp == nil {
		if err == nil {
			err = errors.New("no reply")
		}
		return m.feedError(&a, req, err)
	}
	s.res.Calls++
	m.turns++
	s.recordReply(&a, req, resp)
	a.ToolCalls = resp.ToolCalls
	out := m.runTurn(resp.Text, resp.ToolCalls, resp.FinishReason)
	m.messages = append(m.messages, out.messages...)
	m.record(&a, out)
	s.res.Attempts = append(s.res.Attempts, a)
	if out.end != nil {
		m.end(out.end.status, out.end.class, out.end.msg)
		if out.end.status == fixpoint.StatusValid {
			m.accept()
		}
		return s.last(), DocAction{}
	}
	return s.last(), m.Next()
}

// record sets what a turn came to on its attempt: the value after it,
// the errors of the calls refused (the class theirs), the warnings and
// grades of a finish, and the correction sent (the refusals, or the
// nudge).
func (m *agent) record(a *fixpoint.Attempt, out turnOut) {
	if m.hasValue {
		a.Value = marshalValue(m.value)
	}
	a.Errors = keepErrors(out.errors)
	a.Class = out.class
	a.Warnings, a.Evidence = out.warnings, out.evidence
	a.Feedback = out.feedback
	if out.end != nil && out.end.status == fixpoint.StatusValid {
		a.Valid, a.Class = true, ""
	}
	res := m.step.res
	if !a.Valid && a.Class != "" {
		res.Status, res.Class = fixpoint.StatusInvalid, a.Class
		res.Error = attemptError(a)
	}
}

// accept makes the run's last value the job's.
func (m *agent) accept() {
	res := m.step.res
	res.Status, res.Class, res.Error = fixpoint.StatusValid, "", ""
	res.Value = marshalValue(m.value)
	res.FirstAttemptValid = len(res.Attempts) == 1
}

// end makes the job final with the status, class and message given.
func (m *agent) end(status fixpoint.Status, class, msg string) {
	res := m.step.res
	res.Status, res.Class, res.Error = status, class, msg
	m.done = true
	m.step.settle()
}

// feedError records a call that got no usable reply: a transient failure
// asks the driver to run the job later, a permanent one ends it failed,
// and a reply that was paid for but could not be read is asked again.
func (m *agent) feedError(a *fixpoint.Attempt, req *fixpoint.Request, err error) (*fixpoint.Attempt, DocAction) {
	s := m.step
	// Step's own recording: the same classes, retries and charges. The
	// helper step is marked done so that it makes no request of its own.
	s.done, s.waitErr = true, nil
	_, act := s.feedError(a, req, err)
	s.pending, s.waitErr = nil, nil
	last := s.last()
	last.Step = fixpoint.StepAgent
	var perr *fixpoint.ProviderError
	switch {
	case act.Err != nil:
		m.waitErr = act.Err
		return last, DocAction{Err: act.Err}
	case errors.As(err, &perr) && perr.Replied() && perr.Class != fixpoint.ClassTooLarge:
		m.turns++
		return last, m.Next()
	}
	m.done = true
	return last, DocAction{}
}

// Outstanding is the attempt the outstanding request records should its
// reply never be fed (see Step.Outstanding).
func (m *agent) Outstanding(req *fixpoint.Request, at time.Time) *fixpoint.Attempt {
	if req == nil || req != m.pending {
		return nil
	}
	s := m.step
	s.pending = req
	defer func() { s.pending = nil }()
	a := s.Outstanding(at)
	a.Step = fixpoint.StepAgent
	return a
}

// Stop ends the job without another call.
func (m *agent) Stop(status fixpoint.Status, class, msg string) {
	m.pending, m.waitErr = nil, nil
	m.end(status, class, msg)
}

// Result is the job's result so far.
func (m *agent) Result() *fixpoint.Result {
	m.step.settle()
	return m.step.res
}
