package sim

import (
	"bytes"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	json "github.com/segmentio/encoding/json"
)

// Line and batch outcomes.
const (
	lineSucceeded = "succeeded"
	lineErrored   = "errored"
	lineExpired   = "expired"
	lineCanceled  = "canceled"

	endCompleted = "completed"
	endExpired   = "expired"
	endCancelled = "cancelled"
	endFailed    = "failed" // an OpenAI input file that did not validate
)

// batchStore holds the batch endpoints' files (OpenAI) and batches (both
// providers) in memory, for the server's life. Lock order: a batch's mu
// before the store's.
type batchStore struct {
	mu      sync.Mutex
	seq     int64
	files   map[string]*batchFile
	batches map[string]*simBatch
	// ids lists each provider's batch ids in creation order.
	ids map[string][]string

	uploaded, created, failed                     atomic.Int64
	succeeded, errored, expired, cancelled, ended atomic.Int64
}

// batchFile is an uploaded input file or a batch's output or error file.
type batchFile struct {
	id, filename, purpose string
	created               time.Time
	data                  []byte
}

// simBatch is one batch. Its requests finish in order (a seeded
// permutation of the input) at times spread over the completion delay;
// advance runs the ones due when the batch is looked at, so that nothing
// runs in the background and a batch's results depend on the seed alone.
type simBatch struct {
	mu       sync.Mutex
	provider string
	id       string
	created  time.Time
	deadline time.Time

	// OpenAI's batch fields.
	endpoint, window, inputFileID, model string
	metadata                             map[string]string
	errors                               []batchError // the input file did not validate

	lines []*batchLine // in input order
	order []int        // the order the requests finish in, and are written in
	next  int          // order[:next] have finished (or were skipped)

	cancelAt  time.Time // when a cancel arrived; zero for none
	ended     bool
	endedAt   time.Time
	endReason string
	// outputFileID and errorFileID are OpenAI's result files, "" for none.
	outputFileID, errorFileID string

	succeeded, errored int
	usage              batchUsage
}

// batchUsage sums the usage of a batch's succeeded requests.
type batchUsage struct {
	input, cached, output int
}

// batchError is an entry of an OpenAI batch's errors.data.
type batchError struct {
	Code    string  `json:"code"`
	Message string  `json:"message"`
	Param   *string `json:"param"`
	Line    *int    `json:"line"`
}

// Fates drawn for a request when its batch is created.
const (
	fateRun     = iota
	fateErrored // ends errored with the provider's 500 (Config.Batch.ErroredShare)
	fateExpired // ends expired (Config.Batch.ExpiredShare)
)

// batchLine is one request of a batch and, once it has ended, its result.
type batchLine struct {
	customID string
	body     json.RawMessage // OpenAI's body, Anthropic's params
	doneAt   time.Time
	fate     int
	reqID    string

	outcome string // "" until it ends: lineSucceeded, lineErrored, ...
	status  int    // the HTTP status of its answer
	resp    []byte // the answer: a reply or an error body, compact
}

// newID returns a new object id: prefix and a string that depends on the
// seed and the number of objects made before.
func (st *batchStore) newID(s *Server, prefix, kind string) string {
	st.mu.Lock()
	st.seq++
	n := st.seq
	st.mu.Unlock()
	seed := strconv.FormatUint(s.cfg.Seed, 10)
	if s.cfg.Batch.IDSalt != "" {
		seed += "/" + s.cfg.Batch.IDSalt
	}
	return prefix + idFrom(seed, kind, strconv.FormatInt(n, 10))
}

func (st *batchStore) addFile(f *batchFile) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.files == nil {
		st.files = map[string]*batchFile{}
	}
	st.files[f.id] = f
}

func (st *batchStore) file(id string) *batchFile {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.files[id]
}

func (st *batchStore) add(b *simBatch) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.batches == nil {
		st.batches = map[string]*simBatch{}
		st.ids = map[string][]string{}
	}
	st.batches[b.id] = b
	st.ids[b.provider] = append(st.ids[b.provider], b.id)
}

// get returns the provider's batch id, nil if there is none.
func (st *batchStore) get(provider, id string) *simBatch {
	st.mu.Lock()
	defer st.mu.Unlock()
	if b := st.batches[id]; b != nil && b.provider == provider {
		return b
	}
	return nil
}

// newestFirst lists the provider's batches, the last created first.
func (st *batchStore) newestFirst(provider string) []*simBatch {
	st.mu.Lock()
	defer st.mu.Unlock()
	ids := st.ids[provider]
	out := make([]*simBatch, len(ids))
	for i, id := range ids {
		out[len(ids)-1-i] = st.batches[id]
	}
	return out
}

// newBatch makes a batch of the given requests, created at now: it draws
// each request's fate and the order they finish in.
func (s *Server) newBatch(provider, id string, now time.Time, lines []*batchLine) *simBatch {
	b := &simBatch{provider: provider, id: id, created: now, deadline: now.Add(s.cfg.Batch.Deadline), lines: lines}
	n := len(lines)
	nExp := min(n, int(math.Round(s.cfg.Batch.ExpiredShare*float64(n))))
	nErr := min(n-nExp, int(math.Round(s.cfg.Batch.ErroredShare*float64(n))))
	for i, li := range s.rng("batch-fate", id).Perm(n) {
		switch {
		case i < nExp:
			lines[li].fate = fateExpired
		case i < nExp+nErr:
			lines[li].fate = fateErrored
		}
	}
	b.order = s.rng("batch-order", id).Perm(n)
	delay := max(s.cfg.Batch.CompletionDelay, 0)
	for rank, li := range b.order {
		l := lines[li]
		l.doneAt = now.Add(time.Duration(float64(delay) * float64(rank+1) / float64(n)))
		l.reqID = "req_" + idFrom(id, l.customID)
	}
	s.batches.created.Add(1)
	return b
}

// advance brings b to time now: the requests due by then (and before a
// cancel or the deadline) run, in order, and the batch ends when its last
// request, its cancel or its deadline is due. The caller holds b.mu.
func (b *simBatch) advance(s *Server, now time.Time) {
	if b.ended {
		return
	}
	complete := b.created.Add(max(s.cfg.Batch.CompletionDelay, 0))
	cut := now
	if !b.cancelAt.IsZero() && b.cancelAt.Before(cut) {
		cut = b.cancelAt
	}
	if b.deadline.Before(cut) {
		cut = b.deadline
	}
	for b.next < len(b.order) {
		l := b.lines[b.order[b.next]]
		if l.doneAt.After(cut) {
			break
		}
		b.next++
		if l.fate != fateExpired { // an expired request never runs
			s.runLine(b, l)
		}
	}
	end, reason := complete, endCompleted
	switch {
	case !b.cancelAt.IsZero():
		end, reason = b.cancelAt.Add(s.cfg.Batch.CancelDelay), endCancelled
		if b.deadline.Before(end) {
			end, reason = b.deadline, endExpired
		}
	case b.deadline.Before(complete):
		end, reason = b.deadline, endExpired
	}
	if now.Before(end) {
		return
	}
	b.finish(s, end, reason)
}

// runLine answers one request of b as a single call is answered, at the
// time it finishes. The caller holds b.mu.
func (s *Server) runLine(b *simBatch, l *batchLine) {
	if l.fate == fateErrored {
		l.status, l.resp = 500, compactError(b.provider, statusError(b.provider, 500), l.reqID)
	} else {
		hit := s.cfg.Batch.CacheHitProb >= 1 ||
			s.rng("batch-cache", b.id, l.customID).Float64() < s.cfg.Batch.CacheHitProb
		a := s.answer(b.provider, l.body, l.doneAt, l.reqID, hit)
		l.status, l.resp = a.status, a.body
		if a.status == 200 {
			b.usage.input += a.pTok
			b.usage.cached += a.cache.read
			b.usage.output += a.cTok
		}
	}
	if l.status == 200 {
		l.outcome = lineSucceeded
		b.succeeded++
		s.batches.succeeded.Add(1)
		return
	}
	l.outcome = lineErrored
	b.errored++
	s.batches.errored.Add(1)
}

// finish ends b at end: requests that have not finished end expired or
// cancelled, and OpenAI's result files are written. The caller holds b.mu.
func (b *simBatch) finish(s *Server, end time.Time, reason string) {
	for _, li := range b.order {
		l := b.lines[li]
		if l.outcome != "" {
			continue
		}
		if l.fate == fateExpired || reason == endExpired {
			l.outcome = lineExpired
			s.batches.expired.Add(1)
			continue
		}
		l.outcome = lineCanceled
		s.batches.cancelled.Add(1)
	}
	b.ended, b.endedAt, b.endReason = true, end, reason
	s.batches.ended.Add(1)
	if b.provider == "openai" {
		b.writeFiles(s)
	}
}

// answered is a request answered as a single call, before any transport
// fault.
type answered struct {
	status     int
	body       []byte // the reply, or the provider's error body (compact)
	pTok, cTok int
	cache      cacheUse
}

// answer answers one request of a batch the way ServeHTTP answers the same
// request as a single call (the same reply for the same request), at time
// now, without transport faults, rate limits or think time. hit is false
// for a request the draw of Config.Batch.CacheHitProb keeps from reading
// the prompt cache.
func (s *Server) answer(provider string, body []byte, now time.Time, reqID string, hit bool) answered {
	var req *chatReq
	var aerr *apiError
	if provider == "anthropic" {
		req, aerr = parseAnthropic(body, &s.systems)
	} else {
		req, aerr = parseOpenAI(body, &s.systems)
	}
	if aerr != nil {
		return answered{status: aerr.status, body: compactError(provider, aerr, reqID)}
	}
	c := &call{s: s, provider: provider, reqID: reqID, now: now, batch: true}
	pTok := tokens(promptBytes(req))
	cu := s.cache(provider, req, now, hit)
	out := c.reply(req, pTok, cu, limitResult{}, false)
	return answered{status: 200, body: out.body, pTok: pTok, cTok: out.cTok, cache: cu}
}

// compactError is the provider's error body without its final newline,
// for a JSONL line.
func compactError(provider string, e *apiError, reqID string) []byte {
	return bytes.TrimRight(errorBody(provider, e, reqID), "\n")
}

// counts returns how many of b's requests ended each way.
func (b *simBatch) counts() (succeeded, errored, expired, canceled int) {
	for _, l := range b.lines {
		switch l.outcome {
		case lineSucceeded:
			succeeded++
		case lineErrored:
			errored++
		case lineExpired:
			expired++
		case lineCanceled:
			canceled++
		}
	}
	return
}

// OpenAI result-file lines.
type oaResultLine struct {
	ID       string            `json:"id"`
	CustomID string            `json:"custom_id"`
	Response *oaResultResponse `json:"response"`
	Error    *oaResultError    `json:"error"`
}

type oaResultResponse struct {
	StatusCode int             `json:"status_code"`
	RequestID  string          `json:"request_id"`
	Body       json.RawMessage `json:"body"`
}

type oaResultError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// writeFiles writes an ended OpenAI batch's output file (one line per
// succeeded request) and error file (one per other request: an error
// answer under response, an expired or cancelled one under error), in the
// order the requests finished. A file with no line is not made.
func (b *simBatch) writeFiles(s *Server) {
	var out, errs bytes.Buffer
	for _, li := range b.order {
		l := b.lines[li]
		line := oaResultLine{ID: "batch_req_" + idFrom(b.id, l.customID, "line"), CustomID: l.customID}
		switch l.outcome {
		case lineSucceeded, lineErrored:
			line.Response = &oaResultResponse{StatusCode: l.status, RequestID: l.reqID, Body: l.resp}
		case lineExpired:
			line.Error = &oaResultError{Code: "batch_expired", Message: "This request could not be executed before the completion window expired."}
		case lineCanceled:
			line.Error = &oaResultError{Code: "batch_cancelled", Message: "This request was cancelled before it could be executed."}
		}
		dst := &errs
		if l.outcome == lineSucceeded {
			dst = &out
		}
		enc, _ := json.Marshal(line)
		dst.Write(enc)
		dst.WriteByte('\n')
	}
	for _, f := range []struct {
		buf  *bytes.Buffer
		kind string
		id   *string
	}{{&out, "output", &b.outputFileID}, {&errs, "error", &b.errorFileID}} {
		if f.buf.Len() == 0 {
			continue
		}
		*f.id = "file-" + idFrom(b.id, f.kind)
		s.batches.addFile(&batchFile{id: *f.id, filename: b.id + "_" + f.kind + ".jsonl", purpose: "batch_output",
			created: b.endedAt, data: f.buf.Bytes()})
	}
}

// Anthropic result lines.
type antResultLine struct {
	CustomID string    `json:"custom_id"`
	Result   antResult `json:"result"`
}

type antResult struct {
	Type    string          `json:"type"`
	Message json.RawMessage `json:"message,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

// anthropicResults renders an ended Anthropic batch's results, in the
// order the requests finished: the message, or the whole error envelope
// nested under error, or only the type.
func (b *simBatch) anthropicResults() []byte {
	var buf bytes.Buffer
	for _, li := range b.order {
		l := b.lines[li]
		line := antResultLine{CustomID: l.customID, Result: antResult{Type: l.outcome}}
		switch l.outcome {
		case lineSucceeded:
			line.Result.Message = l.resp
		case lineErrored:
			line.Result.Error = l.resp
		}
		enc, _ := json.Marshal(line)
		buf.Write(enc)
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}
