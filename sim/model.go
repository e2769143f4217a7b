package sim

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/extract"
)

// nmsg is one message, normalized across wire formats.
type nmsg struct {
	role string // system, user, assistant, tool
	text string
	// calls and results are an agent request's tool calls (of an
	// assistant turn) and tool results (of a tool turn, or of an
	// Anthropic user turn).
	calls   []ncall
	results []nresult
}

// chatReq is a request normalized across wire formats.
type chatReq struct {
	provider string
	model    string
	system   string
	msgs     []nmsg
	// schema is the JSON Schema found in the request, nil for none.
	schema []byte
	// schemaInPrompt is set when the schema came from a marked block (it is
	// then already counted in the prompt's bytes).
	schemaInPrompt bool
	// toolName is set when the reply is a tool call.
	toolName   string
	toolForced bool
	maxTokens  int
	user       string
	// jsonOnly is set by OpenAI's json_object and Ollama's "json" format:
	// without a schema the reply is still a JSON object.
	jsonOnly bool
	// cacheKey is OpenAI's prompt_cache_key, cacheTTL the retention its
	// prompt_cache_retention asks for (0: the default).
	cacheKey string
	cacheTTL time.Duration
	// flex is set by OpenAI's service_tier "flex".
	flex bool
	// bounds are the block boundaries of an Anthropic prompt with a
	// cache_control breakpoint (nil without one), in order.
	bounds []cacheBound
	// agent is set when the request offers the agent's tools.
	agent *agentReq
}

// plan is what the model says, before it is put on the wire.
type plan struct {
	// text is the reply text (JSON with formatting faults, prose, refusal).
	text string
	// value is the JSON value (for tool inputs sent as objects); nil when
	// the reply has none (refusal, empty, truncated, prose).
	value   any
	outcome FaultKind // "", FaultTruncation, FaultRefusal, FaultEmpty
	faults  []ContentFault
	formats []FaultKind
	turn    int
	isJSON  bool
	key     string
	// patch is set for a JSON Patch reply (text only, whatever the mode).
	patch bool
}

// RefusalText is the text of a refusal reply.
const RefusalText = "I'm sorry, but I can't help with that."

// hashStrings is FNV-1a (64-bit) over the parts, each followed by a zero
// byte: what hash/fnv gives, without copying each part (a schema of a few
// kilobytes, several times a request) into a byte slice.
func hashStrings(parts ...string) uint64 {
	const offset64, prime64 = 14695981039346656037, 1099511628211
	h := uint64(offset64)
	for _, p := range parts {
		for i := 0; i < len(p); i++ {
			h ^= uint64(p[i])
			h *= prime64
		}
		h *= prime64 // the separator: h ^= 0, then the multiply
	}
	return h
}

// seededRand is a PCG source and the Rand drawing from it, allocated
// together: a generator's Rand escapes (the schema it walks is memoized on
// the heap), and this keeps it one allocation.
type seededRand struct {
	pcg rand.PCG
	rand.Rand
}

func (s *Server) rng(parts ...string) *rand.Rand {
	r := &seededRand{pcg: *rand.NewPCG(s.cfg.Seed, hashStrings(parts...))}
	r.Rand = *rand.New(&r.pcg)
	return &r.Rand
}

// taskKey is the job id of the user id when given (and byPrompt is
// false), else a hash of the first user message.
func taskKey(r *chatReq, byPrompt bool) string {
	if r.user != "" && !byPrompt {
		return TaskKey(r.user, "")
	}
	for _, m := range r.msgs {
		if m.role == "user" {
			return TaskKey("", m.text)
		}
	}
	return "empty"
}

// drawKey is what the replies to a request are drawn by: its task, the
// job's run (the user id's, fixpoint.SplitRequestUser) and the model. A
// requeued job, or the same task on another model, is answered afresh, as
// a real model would answer; one task, run and model always gets the same
// replies. With byPrompt the task alone: a benchmark's batches of one
// dataset get the same replies whatever their settings.
func drawKey(r *chatReq, task string, byPrompt bool) string {
	if byPrompt {
		return task
	}
	_, run := fixpoint.SplitRequestUser(r.user)
	return task + "\x00" + strconv.Itoa(run) + "\x00" + r.model
}

// TaskKey returns the task key the simulator gives a request: the job id
// of user (OpenAI's "user", Anthropic's metadata.user_id; the id without
// its run, fixpoint.SplitRequestUser) when it is not empty, else a hash of
// the first user message's text up to PreviousReplyOpen (of the task
// between TaskOpen and TaskClose, when a repair-strategy request repeats
// it there). A request with neither (no user message) has the key
// "empty". Pass the key to Server.Truth or TruthFor.
func TaskKey(user, firstUserMessage string) string {
	if user != "" {
		id, _ := fixpoint.SplitRequestUser(user)
		return id
	}
	return "h" + strconv.FormatUint(hashStrings(keyText(firstUserMessage)), 36)
}

// between returns the text between lines open and close in s.
func between(s, open, close string) (string, bool) {
	i := strings.Index(s, open)
	if i < 0 {
		return "", false
	}
	rest := s[i+len(open):]
	j := strings.Index(rest, close)
	if j < 0 {
		return "", false
	}
	return strings.TrimSpace(rest[:j]), true
}

// promptSchema finds a marked schema block in the system prompt or the first
// user message.
func promptSchema(r *chatReq) []byte {
	if b, ok := between(r.system, fixpoint.SchemaMarkerOpen, fixpoint.SchemaMarkerClose); ok {
		return []byte(b)
	}
	for _, m := range r.msgs {
		if m.role == "user" {
			if b, ok := between(m.text, fixpoint.SchemaMarkerOpen, fixpoint.SchemaMarkerClose); ok {
				return []byte(b)
			}
			break
		}
	}
	return nil
}

// correction finds the previous reply and the correction text of a request.
func correction(r *chatReq) (prev, feedback string, turn int, ok bool) {
	last := -1
	for i, m := range r.msgs {
		if m.role == "assistant" {
			last = i
			turn++
		}
	}
	if last >= 0 {
		var b strings.Builder
		for _, m := range r.msgs[last+1:] {
			b.WriteString(m.text)
			b.WriteByte('\n')
		}
		return r.msgs[last].text, b.String(), turn, true
	}
	for i := len(r.msgs) - 1; i >= 0; i-- {
		if r.msgs[i].role != "user" {
			continue
		}
		t := r.msgs[i].text
		p, found := between(t, fixpoint.PreviousReplyOpen, fixpoint.PreviousReplyClose)
		if !found {
			return "", "", 0, false
		}
		a := strings.Index(t, fixpoint.PreviousReplyOpen)
		b := strings.Index(t, fixpoint.PreviousReplyClose)
		return p, t[:a] + t[b+len(fixpoint.PreviousReplyClose):], 1, true
	}
	return "", "", 0, false
}

// model decides the reply to a request.
func (s *Server) model(r *chatReq) plan {
	task := taskKey(r, s.cfg.KeyByPrompt)
	schema := r.schema
	if schema == nil {
		schema = promptSchema(r)
		r.schemaInPrompt = schema != nil
	}
	prev, feedback, turn, isCorrection := correction(r)
	var doc *schemaDoc
	var taskIn string // the text the task's values are copied from
	if schema != nil {
		doc = s.schema(schema)
	}
	var soFar any // a sequential document request's value so far
	if doc != nil {
		taskIn = taskText(firstUser(r))
		if doc.isDocument() {
			taskIn, soFar = cutValueSoFar(taskIn)
			task = docTask(task, taskIn)
		}
	}
	key := drawKey(r, task, s.cfg.KeyByPrompt)
	p := plan{turn: turn, key: key}
	if doc == nil {
		p.text = s.prose(key, turn)
		if r.jsonOnly {
			p.text = string(encode(map[string]any{"answer": p.text}, encOpts{}))
		}
		return p
	}
	t := s.newTask(doc, task, taskIn)
	t.extend(soFar)
	t.mergeChunks(mergeValues(taskIn))
	if isCorrection && isPatchRequest(feedback) {
		if pp, ok := s.patchPlan(t, key, prev, feedback, turn); ok {
			pp.turn, pp.key = turn, key
			return pp
		}
	}
	var value any
	var recs []injection
	if isCorrection {
		value = s.correct(t, key, prev, feedback, turn)
	} else {
		value, p.outcome, recs = s.firstAttempt(t, key, true)
	}
	switch p.outcome {
	case FaultRefusal:
		p.text = RefusalText
		return p
	case FaultEmpty:
		return p
	}
	c := checker{doc: doc}
	c.walk(doc.root, value, "", 0)
	p.faults = c.out
	if isCorrection && s.cfg.Mix.shapeOn() && needsRelabel(p.faults) {
		// The shape faults of a correction are those of the first attempt
		// it has not fixed: the first attempt's records name them.
		_, _, recs = s.firstAttempt(t, key, false)
	}
	relabel(p.faults, recs, value)
	p.faults = append(p.faults, t.truthFaults(value, p.faults)...)
	p.isJSON = true
	fr := s.rng("format", key, strconv.Itoa(turn), feedback)
	o := encOpts{indent: fr.IntN(3) == 0}
	formats, fence, prose := s.drawFormats(fr, value, &o)
	p.formats = formats
	p.value = value
	text := string(encode(value, o))
	if fence {
		text = "```json\n" + text + "\n```"
	}
	if prose {
		text = "Here is the JSON you asked for:\n\n" + text + "\n\nLet me know if you need anything else."
	}
	if p.outcome == FaultTruncation {
		cut := len(text)*3/10 + fr.IntN(len(text)/2+1)
		text = truncateUTF8(text, cut)
		p.value = nil
	}
	p.text = text
	return p
}

// drawFormats draws the format faults of the mix (fence, prose, trailing
// comma, single quotes, Python literals, comments) for value, setting o's
// options for those the encoder writes; one the value has no place for is
// not drawn.
func (s *Server) drawFormats(fr *rand.Rand, value any, o *encOpts) (formats []FaultKind, fence, prose bool) {
	for _, k := range allFaultKinds[:6] {
		if fr.Float64() >= s.cfg.Mix.Prob(k) {
			continue
		}
		switch k {
		case FaultFence:
			fence = true
		case FaultProse:
			prose = true
		case FaultTrailingComma:
			if !nonEmptyContainer(value) {
				continue
			}
			o.trailingComma = true
		case FaultSingleQuotes:
			if !hasString(value) {
				continue
			}
			o.singleQuotes = true
		case FaultPythonLiterals:
			if !hasLiteral(value) {
				continue
			}
			o.python = true
		case FaultComments:
			if !nonEmptyContainer(value) {
				continue
			}
			o.comment = "fields follow the schema"
		}
		formats = append(formats, k)
	}
	return formats, fence, prose
}

func truncateUTF8(s string, n int) string {
	if n >= len(s) {
		n = len(s) - 1
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:max(n, 0)]
}

// schemaCacheMax bounds the per-server cache of parsed schemas.
const schemaCacheMax = 1024

// schema parses a schema, or returns nil if it is not one. Parsed schemas
// are read-only and cached: a batch asks the same schema many times.
func (s *Server) schema(b []byte) *schemaDoc {
	return s.schemas.get(b, schemaCacheMax, func(b []byte) *schemaDoc {
		doc, err := parseSchema(b)
		if err != nil {
			return nil
		}
		return doc
	})
}

// Truth returns the ground truth the simulator holds for a task key (see
// TaskKey), schema and task text, as decoded JSON (numbers are
// json.Number): what a clean first attempt answers, and what a lossless
// repair of a shape fault must give back. The task text is the first user
// message of the task's requests (the rendered prompt; see "The ground
// truth is copied from the task" in the package documentation for the
// part of it that counts).
//
// The truth is seeded by the schema's text as the requests carry it (the
// schema slot's raw JSON, or the text between the schema markers, trimmed),
// so that the same schema sent in two formattings has two truths. Truth
// takes the schema in any formatting: when it is not the text of a schema
// the server has been sent, but is equal, as a JSON value, to exactly one
// of them (the last 1,024 distinct schemas), that one's text is used. A
// schema the server has not been sent is used as given (see TruthFor).
func (s *Server) Truth(taskKey string, schema []byte, task string) (any, error) {
	doc, err := parseSchema(schema)
	if err != nil {
		return nil, err
	}
	return s.truth(s.sentSchema(doc), taskKey, taskText(task)), nil
}

// TruthFor is the ground truth of a server with the given seed for a task
// key, schema text and task text, without a server: the schema must be
// the exact text the requests carry (see Server.Truth).
func TruthFor(schema []byte, seed uint64, taskKey, task string) (any, error) {
	return (&Server{cfg: Config{Seed: seed}}).Truth(taskKey, schema, task)
}

// Inventions returns, for a task (as Truth takes it), the value the
// simulator writes at each place where it invents one (fault invented):
// a map from the JSON pointer of each string and number of the truth that
// the task's text grounds and evidence does not exempt, to the value
// invented there, for those places it finds one for. A reply that invents
// at a place writes that value, so a final value holding it there holds an
// invention. It is for measuring what an evidence check lets through.
func (s *Server) Inventions(taskKey string, schema []byte, task string) (map[string]any, error) {
	doc, err := parseSchema(schema)
	if err != nil {
		return nil, err
	}
	d, text := s.sentSchema(doc), taskText(task)
	if d.isDocument() {
		taskKey = docTask(taskKey, text)
	}
	t := s.newTask(d, taskKey, text)
	out := map[string]any{}
	for _, p := range t.leaves(t.truth, true, false) {
		if v, ok := t.inventedAt(p); ok {
			out[p] = v
		}
	}
	return out, nil
}

// sentSchema returns the parsed schema of a request equal to doc: doc
// itself when its text was sent or when no text or several were.
func (s *Server) sentSchema(doc *schemaDoc) *schemaDoc {
	c := &s.schemas
	c.mu.RLock()
	defer c.mu.RUnlock()
	if _, ok := c.m[doc.src]; ok {
		return doc
	}
	want := string(encode(doc.root, encOpts{}))
	var found *schemaDoc
	for _, d := range c.m {
		if d == nil || string(encode(d.root, encOpts{})) != want {
			continue
		}
		if found != nil {
			return doc
		}
		found = d
	}
	if found == nil {
		return doc
	}
	return found
}

// firstAttempt draws the outcome, content and shape faults of a first
// attempt, and with withTruth its truth faults; it returns the shape
// faults it put in.
func (s *Server) firstAttempt(t *task, key string, withTruth bool) (any, FaultKind, []injection) {
	doc, truth := t.doc, t.truth
	r := s.rng("attempt", key, doc.src)
	mix := s.cfg.Mix
	var outcome FaultKind
	switch u := r.Float64(); {
	case u < mix.Refusal:
		outcome = FaultRefusal
	case u < mix.Refusal+mix.Empty:
		outcome = FaultEmpty
	case u < mix.Refusal+mix.Empty+mix.Truncation:
		outcome = FaultTruncation
	}
	value := deepCopy(truth)
	// Draw every kind first, then place the drawn ones scarcest first, so a
	// kind with a single place (one enum in the schema) is not crowded out
	// and each kind appears at its configured rate.
	drawn := make([]FaultKind, 0, len(contentKinds))
	for _, k := range contentKinds {
		if r.Float64() < mix.Prob(k) {
			drawn = append(drawn, k)
		}
	}
	var used []string
	if len(drawn) > 0 {
		c := checker{doc: doc}
		sites := map[FaultKind][]site{}
		c.sites(doc.root, value, "", 0, sites)
		slices.SortStableFunc(drawn, func(a, b FaultKind) int { return len(sites[a]) - len(sites[b]) })
		for _, k := range drawn {
			if p, ok := injectOne(value, k, sites[k], used, r); ok {
				used = append(used, p)
			}
		}
	}
	recs := s.injectShape(doc, truth, value, key, used)
	if withTruth {
		for _, rec := range recs {
			used = append(used, rec.ptr)
			if rec.from != "" {
				used = append(used, rec.from)
			}
		}
		t.injectTruth(value, key, used)
		t.injectAbsent(value, key)
	}
	return value, outcome, recs
}

// correct applies a correction turn to the previous reply.
func (s *Server) correct(t *task, key, prev, feedback string, turn int) any {
	doc, truth := t.doc, t.truth
	value, ok := parseReply(prev)
	if !ok {
		value, _, _ = s.firstAttempt(t, key, true)
	}
	t.alignItems(value)
	r := s.rng("correct", key, strconv.Itoa(turn), prev, feedback)
	c := checker{doc: doc}
	c.walk(doc.root, value, "", 0)
	var remaining []string
	g := generator{doc: doc, rng: r} // one budget for every fix of the turn
	// The truth faults of the value before any fix: a fix of a rule break
	// leaves alone the places whose own errors the correction names.
	for _, f := range t.truthFaults(value, c.out) {
		u := r.Float64()
		if !names(feedback, f) || u >= s.cfg.FixProb {
			remaining = append(remaining, f.Pointer)
			continue
		}
		for _, w := range t.fixWrites(value, f, c.out) {
			w.apply(value)
		}
	}
	for _, f := range c.out {
		u := r.Float64()
		if !names(feedback, f) || u >= s.cfg.FixProb {
			remaining = append(remaining, f.Pointer)
			continue
		}
		if tv, remove := fixFor(f, t, &g); remove {
			pointerDelete(value, f.Pointer)
			if rp, rv, ok := renamedOptional(doc, truth, value, f); ok {
				pointerSet(value, rp, rv)
			}
		} else {
			pointerSet(value, f.Pointer, tv)
		}
	}
	if r.Float64() < s.cfg.NewFaultProb {
		sites := map[FaultKind][]site{}
		c = checker{doc: doc}
		c.sites(doc.root, value, "", 0, sites)
		k := contentKinds[r.IntN(len(contentKinds))]
		injectOne(value, k, sites[k], remaining, r)
	}
	return value
}

// fixFor is what a model fixing fault f of task t writes at its pointer:
// nothing (remove) for an extra property, or for an optional property the
// truth leaves out (null_optional); else the truth's value there, or,
// where the truth has none, for a long document's field its text does not
// hold the simulator's invention (a model told to fill it invents), else
// one generated from g.
func fixFor(f ContentFault, t *task, g *generator) (value any, remove bool) {
	truth := t.truth
	if f.Kind == FaultExtraProperty {
		return nil, true
	}
	if tv, ok := pointerGet(truth, f.Pointer); ok {
		return deepCopy(tv), false
	}
	if v, ok := t.fill(f); ok {
		return v, false
	}
	if absentOptional(truth, f.Pointer) {
		return nil, true
	}
	return g.gen(f.schema, "", 1), false
}

// renamedOptional returns, for an extra property f that is the
// misspelling (renamed_key) of an optional property of the truth the value
// lacks, that property's pointer and the truth's value: a model told the
// misspelt name is not allowed writes it under its name. (A required one
// is reported missing, and fixed as such.)
func renamedOptional(doc *schemaDoc, truth, value any, f ContentFault) (string, any, bool) {
	if f.Kind != FaultExtraProperty {
		return "", nil, false
	}
	i := strings.LastIndexByte(f.Pointer, '/')
	parent, wrong := f.Pointer[:i], unescapeToken(f.Pointer[i+1:])
	node := doc.nodeAt(parent)
	props, _ := node["properties"].(map[string]any)
	for name := range props {
		if misspell(name) != wrong || requiredSet(node)[name] {
			continue
		}
		p := parent + "/" + escapeToken(name)
		tv, inTruth := pointerGet(truth, p)
		if _, inValue := pointerGet(value, p); inTruth && !inValue {
			return p, deepCopy(tv), true
		}
	}
	return "", nil, false
}

// parseReply recovers the JSON value of a previous reply with the extractor.
func parseReply(text string) (any, bool) {
	cands, err := extract.Extract(text)
	if err != nil {
		return nil, false
	}
	for _, c := range cands {
		if c.Truncated {
			continue
		}
		switch c.Value.(type) {
		case map[string]any, []any:
			return c.Value, true
		}
	}
	return nil, false
}

var proseSentences = []string{
	"Here is a short answer.",
	"The request looks straightforward.",
	"I would start with the simplest option and measure.",
	"There are a few trade-offs worth noting.",
	"Most of the work is in the details.",
	"Let me know if you want more depth on any part.",
}

func (s *Server) prose(key string, turn int) string {
	r := s.rng("prose", key, strconv.Itoa(turn))
	n := 2 + r.IntN(3)
	parts := make([]string, n)
	for i := range parts {
		parts[i] = proseSentences[r.IntN(len(proseSentences))]
	}
	return strings.Join(parts, " ")
}

// tokens is the simulator's token count: bytes / 4, rounded up.
func tokens(nbytes int) int { return (nbytes + 3) / 4 }

// promptBytes counts the prompt: system, every message and the schema (when
// it is not already in the prompt).
func promptBytes(r *chatReq) int {
	total := len(r.system)
	for _, m := range r.msgs {
		total += len(m.text)
	}
	if !r.schemaInPrompt {
		total += len(r.schema)
	}
	if r.agent != nil {
		total += r.agent.toolBytes
	}
	return total
}

func idFrom(parts ...string) string {
	h := hashStrings(parts...)
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], h)
	const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	out := make([]byte, 0, 24)
	x := h
	for range 24 {
		out = append(out, alphabet[x%62])
		x = x/62 ^ uint64(b[len(out)%8])*0x9E3779B97F4A7C15
	}
	return string(out)
}
