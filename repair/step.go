package repair

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	json "github.com/segmentio/encoding/json"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/internal/textclip"
	"github.com/fixpoint-dev/fixpoint/validate"
)

// RequestRecord says how much of each request an attempt keeps.
type RequestRecord string

const (
	// RecordFull keeps the messages as sent (system first).
	RecordFull RequestRecord = "full"
	// RecordHash keeps only a SHA-256 of them.
	RecordHash RequestRecord = "hash"
)

// Config configures steps. The zero value is usable.
type Config struct {
	// Prices estimates cost; defaults to DefaultPrices.
	Prices Prices
	// PriceBasis is how the driver's calls are billed: realtime (the
	// default), batch, for a driver that sends them in provider batches,
	// or flex, whose requests ask for the flex tier (ServiceTier). Each
	// attempt records it and is priced on it; a flex attempt on the tier
	// the provider says it served (fixpoint.BasisOf).
	PriceBasis fixpoint.PriceBasis
	// Record defaults to RecordFull.
	Record RequestRecord
	// NowFunc is the clock; defaults to time.Now.
	NowFunc func() time.Time
	// SystemFunc returns the system prompt of a job; drivers pass a cache
	// shared by the jobs of a batch (they share the prompt, and building
	// one parses the schema twice). Defaults to NewPrompt(SystemPrompt(job)).
	SystemFunc func(job *Job) *fixpoint.Prompt
}

// WithDefaults returns a copy of c with its zero fields set.
func (c Config) WithDefaults() Config {
	if c.Prices == nil {
		c.Prices = DefaultPrices()
	}
	if c.Record == "" {
		c.Record = RecordFull
	}
	if c.PriceBasis == "" {
		c.PriceBasis = fixpoint.PriceBasisRealtime
	}
	if c.NowFunc == nil {
		c.NowFunc = time.Now
	}
	if c.SystemFunc == nil {
		c.SystemFunc = func(job *Job) *fixpoint.Prompt { return fixpoint.NewPrompt(SystemPrompt(job)) }
	}
	return c
}

// Action is what a step asks of its driver next.
type Action struct {
	// Request, when not nil, is the call to make: send it and Feed the
	// outcome.
	Request *fixpoint.Request
	// Err, when not nil, says the job must be run again later (it matches
	// ErrTransient, and ErrQuotaExhausted when the provider's quota is
	// spent): the provider still failed after its transport retries. A
	// driver that keeps the job calls Next again after a pause (the step
	// goes on where it was); one that gives up hands the job back.
	Err error
	// Done, when neither is set, says the job is final: see Result.
}

// Done reports whether the job is final.
func (a Action) Done() bool { return a.Request == nil && a.Err == nil }

// Step is the repair loop as a state machine, with no I/O of its own:
// given a job and its attempts so far it says what request to send next,
// and given that request's reply (or provider error) it records the
// attempt (extract, validate, classify) and decides what comes next (the
// feedback, the next request, or the final result). Extract and validate,
// feedback, strategies, token and retry budgets, truncation and refusal
// rules live here; drivers do the calls: synchronously today
// (pipeline.Loop), later in provider batch waves. A Step is not safe for
// concurrent use; it has at most one request outstanding.
type Step struct {
	cfg    Config
	job    Job
	lim    fixpoint.Limits
	system *fixpoint.Prompt
	base   []fixpoint.Message
	// messages are the next request's messages; maxTokens its output cap.
	messages  []fixpoint.Message
	maxTokens int
	replies   int // attempts that got a reply (MaxAttempts counts these)
	res       *fixpoint.Result
	start     time.Time

	pending *fixpoint.Request // sent, awaiting Feed
	waitErr error             // the transient failure of the last call
	done    bool

	// patch, under StrategyPatch, is the value the next request (or the
	// outstanding one) asks to patch; nil when it is not a patch request.
	patch *patchState
	// docNote, when not "", stands for the job's document in the requests
	// an attempt keeps: a chunk's step names the chunk, which is a part of
	// the document the ledger stores, not the document.
	docNote string
}

// Start begins the repair of job, or continues it from prev: the result an
// earlier step of the same job returned with a transient failure (its
// attempts are kept, paid tokens included, and the conversation goes on
// from the last reply; attempts that got no reply do not count against
// MaxAttempts). prev may be nil. An error matches ErrBadJob: the job can
// never run as it is.
func Start(job *Job, prev *fixpoint.Result, cfg Config) (*Step, error) {
	cfg = cfg.WithDefaults()
	s := &Step{cfg: cfg, job: *job, start: cfg.NowFunc()}
	s.res = &fixpoint.Result{JobID: job.ID, StartedAt: s.start}
	if prev != nil {
		s.res, s.start = prev, prev.StartedAt
	}
	s.lim = job.Limits.WithDefaults()
	if err := s.lim.Validate(); err != nil {
		return s, err
	}
	if s.lim.Strategy.Document() {
		return s, fmt.Errorf("%w: job %s: strategy %s runs through StartDocument, not Start", fixpoint.ErrBadJob, job.ID, s.lim.Strategy)
	}
	if job.Schema == nil {
		return s, fmt.Errorf("%w: job %s has no compiled schema", fixpoint.ErrBadJob, job.ID)
	}
	if job.Prompt == "" && len(job.Messages) == 0 {
		return s, fmt.Errorf("%w: job %s has no prompt", fixpoint.ErrBadJob, job.ID)
	}
	if s.job.Mode == "" {
		s.job.Mode = fixpoint.ModePrompt
	}
	if err := s.lim.ValidateMode(s.job.Mode); err != nil {
		return s, err
	}
	s.maxTokens = job.MaxTokens
	if s.maxTokens == 0 {
		s.maxTokens = fixpoint.MaxTokensDefault
	}
	s.base = job.Messages
	if len(s.base) == 0 {
		s.base = []fixpoint.Message{{Role: fixpoint.RoleUser, Content: job.Prompt}}
	}
	if job.Document != "" {
		s.base = withDocument(s.base, job.Document)
	}
	s.system = cfg.SystemFunc(&s.job)
	s.messages = append([]fixpoint.Message(nil), s.base...)
	for i := range s.res.Attempts {
		a := &s.res.Attempts[i]
		if countsAsReply(a) {
			s.replies++
		}
		if a.Feedback != "" {
			s.follow(a)
		}
		if a.Class == fixpoint.OutcomeTruncated && s.lim.TruncationMaxTokens > s.maxTokens {
			s.maxTokens = s.lim.TruncationMaxTokens
		}
	}
	return s, nil
}

// Next says what the driver must do: send a request, wait and call Next
// again (or give up), or nothing: the job is final. Calling it while a
// request is outstanding returns that request again.
func (s *Step) Next() Action {
	if s.pending != nil {
		return Action{Request: s.pending}
	}
	if s.waitErr != nil {
		// The driver kept the job after a transient failure: go on.
		s.waitErr = nil
	}
	if s.done {
		return Action{}
	}
	if s.replies >= s.lim.MaxAttempts {
		return s.finish()
	}
	req := &fixpoint.Request{
		Model:       s.job.Model,
		System:      s.system.Text(),
		Messages:    s.messages,
		Mode:        s.job.Mode,
		Schema:      s.job.SchemaRaw,
		Temperature: s.job.Temperature,
		MaxTokens:   s.maxTokens,
		User:        fixpoint.RequestUser(s.job.ID, s.job.Run),
	}
	if s.job.CacheKey != "" {
		req.CacheKey, req.CacheSystem = s.job.CacheKey, true
	}
	s.askTier(req)
	if s.lim.TokenBudget > 0 {
		spent := s.res.TokensIn + s.res.TokensOut
		if need := EstimateTokens(req); spent+need > s.lim.TokenBudget {
			s.res.Status = fixpoint.StatusFailed
			s.res.Class = fixpoint.OutcomeBudget
			s.res.Error = fmt.Sprintf("token budget %d would be exceeded: %d spent, next attempt needs about %d", s.lim.TokenBudget, spent, need)
			return s.finish()
		}
	}
	s.pending = req
	return Action{Request: req}
}

// Feed records the outcome of the request Next returned: the reply, or the
// provider's error after its transport retries (a *fixpoint.ProviderError, or any
// error for a call that could not be made). started is when the request
// was sent. It returns the attempt recorded and what comes next, as Next
// would. Feeding with no request outstanding is a driver bug and panics.
//
// An attempt's life: its request is recorded, then its reply (usage and
// cost), the reply is checked (extracted, validated, coerced, or patched),
// classified (refusal, truncated, valid or the errors' class), and the
// step decides what comes next (the result, or feedback and a new call).
func (s *Step) Feed(resp *fixpoint.Response, err error, started time.Time) (*fixpoint.Attempt, Action) {
	req := s.pending
	if req == nil {
		panic("repair: Feed without an outstanding request")
	}
	s.pending = nil
	a := fixpoint.Attempt{No: len(s.res.Attempts) + 1, StartedAt: started, PriceBasis: s.cfg.PriceBasis}
	s.recordRequest(&a, req)
	if err != nil || resp == nil {
		if err == nil {
			err = errors.New("no reply")
		}
		return s.feedError(&a, req, err)
	}
	s.res.Calls++
	s.replies++
	s.recordReply(&a, req, resp)
	c := s.checkReply(&a, resp.Text, resp.FinishReason == fixpoint.FinishLength)
	if c.valid && resp.FinishReason != fixpoint.FinishLength {
		s.checkTruth(&a, &c)
	}
	classify(&a, resp, c)
	return s.decide(&a, c)
}

// recordReply records on a what the reply says of itself (when it was
// sent, its latency, text, finish reason, retries and ids) and its usage
// and cost, and adds them to the result.
func (s *Step) recordReply(a *fixpoint.Attempt, req *fixpoint.Request, resp *fixpoint.Response) {
	if !resp.SentAt.IsZero() {
		// The attempt started when its request went out, not when it
		// began waiting for the lane: started_at + latency_ms is when the
		// reply came, and a --rpm budget shows in started_at as it is.
		a.StartedAt = resp.SentAt
	}
	a.Latency = resp.Latency
	a.Raw = resp.Text
	a.FinishReason = resp.FinishReason
	usage, anomaly := resp.Usage, resp.UsageAnomaly
	if note := chargeable(&usage, req, int64(len(resp.Text))); note != "" {
		anomaly = note // a driver whose client let it through
	}
	// The reply stands; the provider_error of an attempt that got one
	// keeps what the provider said its usage was.
	a.ProviderError = anomaly
	if req.ServiceTier == fixpoint.ServiceTierFlex {
		// Asked for flex, priced by the tier the provider says it
		// served: a fallback to the default tier costs the default price.
		a.ServiceTier = resp.ServiceTier
		a.PriceBasis = fixpoint.BasisOf(resp.ServiceTier)
	}
	s.charge(a, usage)
	_, priced := s.cfg.Prices.Lookup(s.job.Model)
	a.Unpriced = !priced
	a.Retries = resp.Retries
	a.ProviderStatus = resp.Status
	a.Model = resp.Model
	a.RequestID = resp.RequestID
	s.res.TransportRetries += len(a.Retries)
}

// askTier asks for the flex tier on req when the job asks for it, or the
// step's calls are billed on basis flex.
func (s *Step) askTier(req *fixpoint.Request) {
	if s.job.ServiceTier == fixpoint.ServiceTierFlex || s.cfg.PriceBasis == fixpoint.PriceBasisFlex {
		req.ServiceTier = fixpoint.ServiceTierFlex
	}
}

// charge records usage on a, prices it on a's basis, and adds the tokens
// to the result's.
func (s *Step) charge(a *fixpoint.Attempt, usage fixpoint.Usage) {
	a.TokensIn = usage.InputTokens
	a.TokensOut = usage.OutputTokens
	a.TokensCached = usage.CachedInputTokens
	a.TokensCacheWrite = usage.CacheWriteTokens
	a.CostUSD = LedgerCost(s.cfg.Prices.CostOn(s.job.Model, a.PriceBasis, a.TokensIn, a.TokensOut, a.TokensCached, a.TokensCacheWrite))
	res := s.res
	res.TokensIn += a.TokensIn
	res.TokensOut += a.TokensOut
	res.TokensCached += a.TokensCached
	res.TokensCacheWrite += a.TokensCacheWrite
}

// checked is what a reply came to once checked: whether it is valid, the
// class of its errors and the local repairs it took; shown is the text of
// its value for a patch request (StrategyPatch only), and patched what
// feedPatch made of a reply to a patch request.
type checked struct {
	valid        bool
	class        string
	localRepairs int
	shown        []byte
	patched      *patchReply
}

// checkReply checks the reply text and records the outcome on a: a reply
// to a patch request is applied (see patch.go), any other is extracted,
// validated and coerced. A reply cut off at the output limit (cut) is not
// coerced: the scalar it ends in is no longer what the model wrote
// ("0.44" cut to "0), and a fix would record, and keep as the job's last
// value, a number the model never gave.
func (s *Step) checkReply(a *fixpoint.Attempt, text string, cut bool) checked {
	if s.patch != nil {
		r := s.feedPatch(a, text)
		return checked{valid: r.valid, class: string(validate.ClassOf(a.Errors)), localRepairs: r.localRepairs, shown: r.shown, patched: &r}
	}
	coerce := Coercer(s.lim.Coerce)
	if cut {
		coerce = nil
	}
	check := validate.CheckWith(s.job.Schema, text, validate.CheckOptions{Coerce: coerce})
	a.Source = check.Source
	a.Repairs = check.Repairs
	a.Coerced = check.Coerced
	a.Errors = check.Errors
	if check.Value != nil || check.Source != "" {
		if b, err := json.Marshal(check.Value); err == nil {
			a.Value = b
		}
	}
	c := checked{valid: check.Valid, class: string(check.Class), localRepairs: len(check.Repairs)}
	if s.lim.Strategy == fixpoint.StrategyPatch && check.Candidate != nil {
		c.shown = check.Candidate.JSON
		if check.Coerced > 0 {
			c.shown = a.Value // the value as repaired locally is what the patch applies to
		}
	}
	return c
}

// classify sets a's class from the reply and what it came to: a refusal,
// a truncated reply, a valid one, or the class of its errors; and bounds
// the errors it keeps.
func classify(a *fixpoint.Attempt, resp *fixpoint.Response, c checked) {
	switch {
	case resp.FinishReason == fixpoint.FinishRefusal || (resp.Refusal != "" && !c.valid) || resp.FinishReason == fixpoint.FinishContentFilter:
		// A reply the provider's content filter stopped may lack what it
		// cut: never accepted, however valid what is left.
		a.Class = fixpoint.OutcomeRefusal
		if resp.Refusal != "" && a.Raw == "" {
			// The refusal came apart from the (empty) reply: its errors
			// said "reply is empty", and error_paths counted it a syntax
			// error.
			a.Raw = resp.Refusal
			a.Errors = []fixpoint.ValidationError{{Path: "", Keyword: "refusal", Class: fixpoint.ClassSyntax,
				Message: "no JSON value: the model refused: " + strconv.Quote(textclip.Runes(resp.Refusal, 80))}}
		}
	case resp.FinishReason == fixpoint.FinishLength:
		// A cut-off reply is never accepted, even when closing it would
		// validate.
		a.Class = fixpoint.OutcomeTruncated
	case c.valid:
		a.Valid = true
		a.RepairedLocally = c.localRepairs > 0
	default:
		a.Class = c.class
	}
	a.Errors = keepErrors(a.Errors)
}

// decide records a on the result and says what comes next: the result
// when a is valid, the retry budget is spent or a was the last attempt;
// else feedback and the next request.
func (s *Step) decide(a *fixpoint.Attempt, c checked) (*fixpoint.Attempt, Action) {
	res := s.res
	if a.Valid {
		return s.accept(a)
	}
	if s.lim.RetryBudget > 0 && res.TransportRetries > s.lim.RetryBudget {
		res.Attempts = append(res.Attempts, *a)
		res.Status = fixpoint.StatusFailed
		res.Class = fixpoint.OutcomeProvider
		res.Error = fmt.Sprintf("transport retry budget %d exceeded (%d retries)", s.lim.RetryBudget, res.TransportRetries)
		return s.last(), s.finish()
	}
	res.Status = fixpoint.StatusInvalid
	res.Class = a.Class
	res.Error = attemptError(a)
	if s.replies == s.lim.MaxAttempts {
		res.Attempts = append(res.Attempts, *a)
		return s.last(), s.finish()
	}
	return s.retry(a, c)
}

// accept ends the job with a, a valid attempt.
func (s *Step) accept(a *fixpoint.Attempt) (*fixpoint.Attempt, Action) {
	res := s.res
	res.Attempts = append(res.Attempts, *a)
	res.Status = fixpoint.StatusValid
	res.Value = a.Value
	res.Class = ""
	res.Error = "" // earlier attempts' errors stay on their attempts
	// Valid on its first answered attempt: a batch request that never
	// ran (expired, errored, cancelled: class provider, no reply) is
	// no try, as a realtime call's transport failures are none. Such
	// a job counted as repaired.
	res.FirstAttemptValid = true
	for _, prev := range res.Attempts[:len(res.Attempts)-1] {
		if prev.Class != fixpoint.OutcomeProvider || prev.Raw != "" {
			res.FirstAttemptValid = false
		}
	}
	res.RepairedLocally = a.RepairedLocally
	return s.last(), s.finish()
}

// retry gives a, an attempt that is not the last, its feedback (raising
// the output cap after a truncated reply when the limits allow) and
// builds the next request from it.
func (s *Step) retry(a *fixpoint.Attempt, c checked) (*fixpoint.Attempt, Action) {
	truncNote := true
	if a.Class == fixpoint.OutcomeTruncated && s.lim.TruncationMaxTokens > s.maxTokens {
		s.maxTokens = s.lim.TruncationMaxTokens
		truncNote = false
	}
	if s.lim.Strategy == fixpoint.StrategyPatch {
		a.Feedback = s.patchFeedback(a, c.shown, c.patched, truncNote)
	} else {
		a.Feedback = feedback(s.lim.Feedback, a, truncNote)
	}
	s.res.Attempts = append(s.res.Attempts, *a)
	s.follow(s.last())
	return s.last(), s.Next()
}

// countsAsReply reports whether a counts against Limits.MaxAttempts: a
// call that got a reply, usable or not (a 2xx reply that could not be
// read was made and billed; see fixpoint.ProviderError.Replied). A call
// that failed without one does not.
func countsAsReply(a *fixpoint.Attempt) bool {
	return a.Class != fixpoint.OutcomeProvider || (a.ProviderStatus >= 200 && a.ProviderStatus <= 299)
}

// feedError records a call that got no usable reply.
func (s *Step) feedError(a *fixpoint.Attempt, req *fixpoint.Request, err error) (*fixpoint.Attempt, Action) {
	res := s.res
	var perr *fixpoint.ProviderError
	a.Class = fixpoint.OutcomeProvider
	a.ProviderError = err.Error()
	if errors.As(err, &perr) {
		a.ProviderStatus = perr.Status
		a.ProviderClass = perr.Class
		a.ProviderCode = perr.Code
		a.Retries = perr.Retries
		a.RequestID = perr.RequestID
		// A reply that could not be used was made and billed: keep its
		// first bytes (the error names its size).
		a.Raw = perr.Head
		billed := perr.Billed
		note := chargeable(&billed, req, perr.Size)
		if note == "" && perr.Replied() && billed == (fixpoint.Usage{}) {
			// Paid whatever its usage says: a driver that read none
			// still charges the call.
			billed = fixpoint.EstimateUsage(req, perr.Size)
			note = fmt.Sprintf("no usage reported for a reply that was made; charged by estimate: %d input, %d output", billed.InputTokens, billed.OutputTokens)
		}
		if note != "" {
			a.ProviderError += "; " + note
		}
		if req.ServiceTier == fixpoint.ServiceTierFlex {
			a.PriceBasis = fixpoint.BasisOf("") // no reply says which tier served it: the default price
		}
		s.charge(a, billed)
		_, priced := s.cfg.Prices.Lookup(s.job.Model)
		a.Unpriced = perr.Replied() && !priced
	}
	a.Latency = s.cfg.NowFunc().Sub(a.StartedAt)
	res.TransportRetries += len(a.Retries)
	// The failed call is an attempt of the job, whatever comes next.
	res.Calls++
	res.Attempts = append(res.Attempts, *a)
	res.Status = fixpoint.StatusFailed
	res.Class = fixpoint.OutcomeProvider
	res.Error = err.Error()
	if perr != nil && perr.Replied() {
		// Paid for: an attempt like any failed one, bounded by
		// MaxAttempts. A body that could not be read may read the next
		// time; the same request goes again (there is no reply to give
		// feedback on). One too large would come back as large.
		s.replies++
		if perr.Class == fixpoint.ClassTooLarge || s.replies >= s.lim.MaxAttempts {
			return s.last(), s.finish()
		}
		return s.last(), s.Next()
	}
	switch {
	case perr != nil && perr.Class == fixpoint.ClassQuotaExhausted:
		// Permanent for the lane, not for the job: the driver delays the
		// job instead of burning its deliveries.
		s.waitErr = fmt.Errorf("%w: %w: job %s: %w", fixpoint.ErrTransient, fixpoint.ErrQuotaExhausted, s.job.ID, err)
	case perr != nil && perr.Class == fixpoint.ClassAuth && perr.Status == 401:
		// The key is wrong for every job, not this one (a 403 may be
		// about this model only, and ends the job below).
		s.waitErr = fmt.Errorf("%w: %w: job %s: %w", fixpoint.ErrTransient, fixpoint.ErrProviderAuth, s.job.ID, err)
	case perr != nil && perr.Class == fixpoint.ClassModelNotFound:
		// Wrong for every job of the model, as a refused key is for
		// every job of the provider: the job waits for the model.
		s.waitErr = fmt.Errorf("%w: %w: job %s: %w", fixpoint.ErrTransient, fixpoint.ErrModelNotFound, s.job.ID, err)
	case perr != nil && perr.Permanent():
		return s.last(), s.finish()
	default:
		s.waitErr = fmt.Errorf("%w: call provider for job %s: %w", fixpoint.ErrTransient, s.job.ID, err)
	}
	s.settle()
	return s.last(), Action{Err: s.waitErr}
}

// Stop ends the job before its next call with the status, class and
// reason given: a driver's decision the step cannot make itself (the
// batch's spend cap reached: StatusOverBudget, OutcomeBudget).
func (s *Step) Stop(status fixpoint.Status, class, reason string) {
	s.pending, s.waitErr = nil, nil
	s.res.Status, s.res.Class, s.res.Error = status, class, reason
	s.finish()
}

// Result returns the job's result: final once Next reports Done, else the
// attempts so far (what Start takes as prev to continue the job).
func (s *Step) Result() *fixpoint.Result {
	s.settle()
	return s.res
}

// Outstanding is the attempt the outstanding request (the one the last
// Action asked for) is, should its outcome never be fed: sent at started,
// with no reply, class provider and fixpoint.ClassInFlight. A driver that keeps
// a journal of its calls writes it as a call goes out, so that one in
// flight when the driver dies is recorded all the same. It does not change
// the step; nil when no request is outstanding.
func (s *Step) Outstanding(started time.Time) *fixpoint.Attempt {
	if s.pending == nil {
		return nil
	}
	a := fixpoint.Attempt{No: len(s.res.Attempts) + 1, StartedAt: started, PriceBasis: s.cfg.PriceBasis,
		Class: fixpoint.OutcomeProvider, ProviderClass: fixpoint.ClassInFlight,
		ProviderError: "no reply seen: the worker died with the call in flight (the provider may have billed a reply, for tokens not known)"}
	s.recordRequest(&a, s.pending)
	return &a
}

func (s *Step) last() *fixpoint.Attempt { return &s.res.Attempts[len(s.res.Attempts)-1] }

func (s *Step) finish() Action {
	s.done = true
	s.settle()
	return Action{}
}

// settle brings the result's cost and wall time up to date. The cost is
// the sum of the attempts' costs: each was priced on its own basis when it
// was recorded (a job continued from prev may mix realtime and batch
// attempts).
func (s *Step) settle() {
	cost := 0.0
	for i := range s.res.Attempts {
		cost += s.res.Attempts[i].CostUSD
	}
	s.res.CostUSD = cost
	s.res.Wall = s.cfg.NowFunc().Sub(s.start)
}

// nextMessages builds the conversation for the next round.
func nextMessages(strategy fixpoint.Strategy, base, prev []fixpoint.Message, a *fixpoint.Attempt) []fixpoint.Message {
	raw := a.Raw
	if raw == "" {
		raw = "(empty reply)"
	}
	if strategy == fixpoint.StrategyRepair {
		out := append([]fixpoint.Message(nil), base[:len(base)-1]...)
		last := base[len(base)-1]
		return append(out, fixpoint.Message{Role: fixpoint.RoleUser, Content: repairMessage(last.Content, raw, a.Feedback)})
	}
	out := append([]fixpoint.Message(nil), prev...)
	return append(out,
		fixpoint.Message{Role: fixpoint.RoleAssistant, Content: raw},
		fixpoint.Message{Role: fixpoint.RoleUser, Content: a.Feedback},
	)
}

func attemptError(a *fixpoint.Attempt) string {
	switch a.Class {
	case fixpoint.OutcomeTruncated:
		return "reply truncated at the output token limit"
	case fixpoint.OutcomeRefusal:
		return "model refused"
	}
	if len(a.Errors) > 0 {
		msg := a.Errors[0].Message
		if n := errorCount(a.Errors); n > 1 {
			msg += fmt.Sprintf(" (and %d more)", n-1)
		}
		return msg
	}
	return a.Class
}

// MaxAttemptErrors bounds the errors an attempt keeps: a reply of 500,000
// wrong items kept 500,000 errors in the worker's memory and in its
// ledger row (4 MB of jsonb a row). Those past the bound become one error
// of keyword KeywordMoreErrors that counts them, by keyword too; the
// attempt's class is that of all of them.
const MaxAttemptErrors = 1000

// KeywordMoreErrors is the keyword of the error that stands for those an
// attempt did not keep (see MaxAttemptErrors), or a validation (see
// validate.MaxErrors).
const KeywordMoreErrors = validate.KeywordMoreErrors

func keepErrors(errs []fixpoint.ValidationError) []fixpoint.ValidationError {
	if len(errs) <= MaxAttemptErrors {
		return errs
	}
	kept, rest := pickErrors(errs, MaxAttemptErrors-1)
	return append(kept, fixpoint.ValidationError{Path: "", Keyword: KeywordMoreErrors, Class: validate.ClassOf(rest),
		Message: fmt.Sprintf("%d more errors, not kept: %s", errorCount(rest), keywordCounts(rest))})
}

// pickErrors picks n of errs in their order: the first of each keyword,
// then the first of the rest (a moreErrors error is never picked), so that
// every kind of error is seen; rest is the others.
func pickErrors(errs []fixpoint.ValidationError, n int) (picked, rest []fixpoint.ValidationError) {
	pick := make([]bool, len(errs))
	seen, k := map[string]bool{}, 0
	for i, e := range errs {
		if k < n && e.Keyword != KeywordMoreErrors && !seen[e.Keyword] {
			seen[e.Keyword], pick[i] = true, true
			k++
		}
	}
	for i, e := range errs {
		if k < n && !pick[i] && e.Keyword != KeywordMoreErrors {
			pick[i] = true
			k++
		}
	}
	for i, e := range errs {
		if pick[i] {
			picked = append(picked, e)
		} else {
			rest = append(rest, e)
		}
	}
	return picked, rest
}

// errorCount is how many errors errs stands for, a moreErrors error for
// those it counts.
func errorCount(errs []fixpoint.ValidationError) int {
	return validate.ErrorCount(errs)
}

// chargeable replaces usage that cannot be what req used
// (fixpoint.Usage.Anomaly) by an estimate (fixpoint.EstimateUsage): req's
// input and a quarter of the reply's bytes. It returns the note
// recording what was reported, "" when the usage stands. llm.Client does
// this already; the step does it again for any driver, so that no attempt
// is priced below zero (which lifts a spend cap) or past what the ledger
// holds.
func chargeable(u *fixpoint.Usage, req *fixpoint.Request, replyBytes int64) string {
	why := u.Anomaly(req)
	if why == "" {
		return ""
	}
	est := fixpoint.EstimateUsage(req, replyBytes)
	note := fmt.Sprintf("usage anomaly: the provider reported input %d, output %d, cached %d, cache write %d tokens (%s); charged by estimate: %d input, %d output",
		u.InputTokens, u.OutputTokens, u.CachedInputTokens, u.CacheWriteTokens, why, est.InputTokens, est.OutputTokens)
	*u = est
	return note
}

// EstimateTokens is the rough measure the lane limiter uses too: a quarter
// of the request's bytes, plus the output allowance.
func EstimateTokens(req *fixpoint.Request) int {
	return fixpoint.EstimateUsage(req, 0).InputTokens + req.MaxTokens
}

// recordRequest keeps what the ledger records of a request: the hash of
// the whole request (the messages as sent, system prompt first, as JSON),
// and unless only the hash is kept, the messages after the system prompt
// and the prompt itself, which the ledger stores once for all the attempts
// that sent it.
func (s *Step) recordRequest(a *fixpoint.Attempt, req *fixpoint.Request) {
	sys := s.system
	rest := []byte("[]")
	if len(req.Messages) > 0 {
		rest, _ = json.Marshal(req.Messages)
	}
	h := sha256.New()
	if sys.Message() == nil {
		h.Write(rest)
	} else {
		// The same bytes as json.Marshal of [system, messages...]: its
		// elements are written one after another, comma separated.
		h.Write([]byte{'['})
		h.Write(sys.Message())
		if len(req.Messages) > 0 {
			h.Write([]byte{','})
			h.Write(rest[1:])
		} else {
			h.Write([]byte{']'})
		}
	}
	a.RequestHash = hex.EncodeToString(h.Sum(nil))
	if s.cfg.Record == RecordFull {
		a.Request = rest
		if s.job.Document != "" {
			// The ledger has the document once (its documents table):
			// each attempt keeping it would store it once a call.
			a.Request, _ = json.Marshal(withoutDocument(req.Messages, s.job.Document, s.docNote))
		}
		if sys.Message() != nil {
			a.System = sys
		}
	}
}
