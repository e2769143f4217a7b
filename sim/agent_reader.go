package sim

import (
	"encoding/json"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/fixpoint-dev/fixpoint"
)

// The reader is how the simulator answers an agent request over a long
// document that is not in the request (the agent strategy of package
// repair sends an outline and offers read_chunk): it reads the chunks
// in order, one a turn, and puts what it finds in each into the output,
// then finishes. Its value for a chunk is the one the simulator gives a
// chunk call over that chunk's text (the same draws, the same faults of
// the mix); the turn that puts it also reads the next chunk:
//
//	turn 0: read_chunk(0)
//	turn k: update_output(value of chunk k-1), read_chunk(k)
//	last:   update_output(value of the last chunk); then finish
//
// The first value is put with set_output. A value puts what the chunk
// states and what the output lacks: the list's items, the fields the
// chunk's text holds, and the fields the last put's result says are
// still missing (a model does not replace a party it found on page 1
// with what it makes up on page 30, where no party is named). The mix's faults on a chunk's first put:
//
//   - content faults (a wrong type, an enum, a bound, an extra property)
//     make a put the agent refuses; the next turn puts the value
//     corrected as a correction turn corrects a reply (FixProb), up to
//     readerTriesMax puts a chunk, then the chunk is left;
//   - a prose fault or a refusal answers text instead of a call, for the
//     agent to nudge; the nudged turn makes the calls;
//   - an empty reply finishes early (a premature finish), before the
//     document is read;
//   - a truncation cuts the put's arguments;
//   - invented values (the mix's Invented, and InventedAbsent for the
//     fields a chunk does not hold) are put as any value is.
//
// A finish refused starts a new pass, drawn afresh, that puts only the
// fields the refusal named: it searches the document for the phrase
// that states each named field, and for the name of each list item the
// refusal names (up to readerItemsMax), reads the chunks the searches
// find and puts those fields and items; when the refusal names the list
// but no item (or more), it reads every chunk again. The
// reader's state is a function of the conversation (readerWalk): the
// tool results say which calls were taken, read_chunk's results the
// chunks' texts, search's results the chunks to read.

// readerTriesMax is how many puts of one chunk's value the reader makes
// before it leaves the chunk.
const readerTriesMax = 2

// chunkResultRE reads the header of a read_chunk result (package
// repair's chunkHeader): the chunk's number and the count.
var chunkResultRE = regexp.MustCompile(`^chunk (\d+) of (\d+), code points \d+ to \d+:`)

// searchChunkRE reads the chunks a search result's passage is in (package
// repair's searchDocument): the first is read.
var searchChunkRE = regexp.MustCompile(`(?m)^- code points \d+ to \d+, chunk (\d+)`)

// readerSampleMax bounds the text the reader tells the document's
// language by.
const readerSampleMax = 4096

// readerState is where a reader's run is, read from its conversation.
type readerState struct {
	of       int            // the chunk count; 0 until a chunk was read
	texts    map[int]string // each chunk's text, where a result still shows it
	queue    []int          // chunks read whose value is not put yet, in order
	tries    map[int]int    // refused puts of a queued chunk
	lastArgs map[int]string // the last refused put of a chunk, and its result
	lastErr  map[int]string
	nextRead int      // the first pass's next chunk to read
	pass     int      // finishes refused so far
	named    []string // the fields the last refused finish named
	missing  []string // the fields the output lacks, after the last put taken
	anySet   bool
	nudged   bool // the last turn was a text answer
	turns    int
	// In a pass after the first: the phrases searched, the chunks the
	// searches found, and the chunks read.
	searched   []string
	found      []int
	readInPass map[int]bool
	items      []string        // the list items the refused finish named, by key
	sample     strings.Builder // chunk text to tell the language by
}

// readerTurn is one assistant turn and the results that answer it, in
// the order of its calls.
type readerTurn struct {
	calls   []ncall
	results []nresult
}

func readerTurns(msgs []nmsg) []readerTurn {
	var out []readerTurn
	for _, m := range msgs {
		switch {
		case m.role == "assistant":
			out = append(out, readerTurn{calls: m.calls})
		case len(out) > 0:
			out[len(out)-1].results = append(out[len(out)-1].results, m.results...)
		}
	}
	return out
}

// readerWalk reads a reader's state from the conversation.
func readerWalk(msgs []nmsg) *readerState {
	st := &readerState{texts: map[int]string{}, tries: map[int]int{}, lastArgs: map[int]string{},
		lastErr: map[int]string{}, readInPass: map[int]bool{}}
	for _, t := range readerTurns(msgs) {
		st.turns++
		st.nudged = len(t.calls) == 0
		for j, c := range t.calls {
			var res nresult
			answered := j < len(t.results)
			if answered {
				res = t.results[j]
			}
			taken := answered && !res.isError
			switch c.name {
			case fixpoint.ToolReadChunk:
				if taken {
					st.read(res.content)
				}
			case fixpoint.ToolSearch:
				if taken {
					st.searchResult(c.args, res.content)
				}
			case fixpoint.ToolSetOutput, fixpoint.ToolUpdateOutput:
				st.put(c.args, taken, res.content)
			case fixpoint.ToolFinish:
				if answered && res.isError {
					st.pass++
					st.named = namedFields(res.content)
					st.items = namedItems(res.content)
					if len(st.named) == 0 {
						// No field named (no output was set): every field.
						st.named = append(slices.Clone(docScalars), docList)
					}
					st.queue, st.tries = nil, map[int]int{}
					st.searched, st.found, st.readInPass = nil, nil, map[int]bool{}
				}
			}
		}
	}
	return st
}

// read records a read_chunk result.
func (st *readerState) read(content string) {
	m := chunkResultRE.FindStringSubmatch(content)
	if m == nil {
		return
	}
	n, _ := strconv.Atoi(m[1])
	st.of, _ = strconv.Atoi(m[2])
	if _, text, whole := strings.Cut(content, "\n\n"); whole {
		st.texts[n] = text
		if st.sample.Len() < readerSampleMax {
			st.sample.WriteString(text[:min(len(text), readerSampleMax)])
		}
	}
	if !slices.Contains(st.queue, n) {
		st.queue = append(st.queue, n)
	}
	if st.pass == 0 {
		st.nextRead = max(st.nextRead, n+1)
	}
	st.readInPass[n] = true
}

// searchResult records a search's query and the chunks it found.
func (st *readerState) searchResult(args, content string) {
	var q struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal([]byte(args), &q)
	st.searched = append(st.searched, strings.TrimSpace(q.Text))
	for _, m := range searchChunkRE.FindAllStringSubmatch(content, -1) {
		if n, err := strconv.Atoi(m[1]); err == nil && !slices.Contains(st.found, n) {
			st.found = append(st.found, n)
		}
	}
}

// put records a put of the queue's head: taken, or refused with result.
func (st *readerState) put(args string, taken bool, result string) {
	if taken {
		// What the output still lacks is in the result (package repair
		// names the required fields missing after each put): the
		// arguments of old puts are left out of the conversation.
		_, lacks, _ := strings.Cut(result, "still requires")
		st.missing = namedFields(lacks)
		st.anySet = true
	}
	if len(st.queue) == 0 {
		return
	}
	head := st.queue[0]
	if taken {
		st.queue = st.queue[1:]
		delete(st.tries, head)
		return
	}
	st.tries[head]++
	st.lastArgs[head], st.lastErr[head] = args, result
	if st.tries[head] >= readerTriesMax {
		st.queue = st.queue[1:]
		delete(st.tries, head)
	}
}

// namedFieldRE finds the root fields an error names ("/governing_law").
var namedFieldRE = regexp.MustCompile(`(?:^|[^A-Za-z0-9_/])/([A-Za-z_][A-Za-z0-9_]*)`)

func namedFields(text string) []string {
	var out []string
	for _, m := range namedFieldRE.FindAllStringSubmatch(text, -1) {
		if !slices.Contains(out, m[1]) {
			out = append(out, m[1])
		}
	}
	return out
}

// namedItemRE finds the list items an error names by their key
// (package repair's keyNote).
var namedItemRE = regexp.MustCompile(`\(in the item with name ("(?:[^"\\]|\\.)*")\)`)

// readerItemsMax bounds the items a pass searches for one by one; past
// it the pass reads every chunk.
const readerItemsMax = 5

func namedItems(text string) []string {
	var out []string
	for _, m := range namedItemRE.FindAllStringSubmatch(text, -1) {
		var name string
		if json.Unmarshal([]byte(m[1]), &name) == nil && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// phrase is the start of the sentence of a document in language l that
// states field f, what the reader searches for; "" for the list.
func phrase(l *docLang, f string) string {
	var tmpl string
	switch f {
	case docProvider, docCustomer, docDate:
		tmpl = l.preamble
	case docAmount, docCurrency:
		tmpl = l.amount
	case docNotice:
		tmpl = l.notice
	case docLaw:
		tmpl = l.law
	default:
		return ""
	}
	head, _, _ := strings.Cut(tmpl, "%")
	return strings.TrimSpace(head)
}

// isReader reports whether an agent request is answered by the reader:
// its schema is a document's and its first user message holds no
// document.
func (s *Server) isReader(r *chatReq) bool {
	schema := promptSchema(r)
	if schema == nil {
		schema = r.agent.params
	}
	if schema == nil {
		return false
	}
	doc := s.schema(schema)
	return doc != nil && doc.isDocument() && !strings.Contains(firstUser(r), fixpoint.DocumentOpen)
}

func readCall(n int) ncall {
	return ncall{name: fixpoint.ToolReadChunk, args: `{"n":` + strconv.Itoa(n) + `}`}
}

// nextRead is the next chunk to read: in the first pass the next in
// order; in a later one, a search for the next named field's phrase not
// searched yet (search), else the next chunk a search found, else, when
// the refusal named the list, the next chunk not read in the pass. ok is
// false when nothing is left to read.
func (st *readerState) nextStep() (c ncall, ok bool) {
	if st.pass == 0 {
		if st.of == 0 || st.nextRead < st.of {
			return readCall(st.nextRead), true
		}
		return ncall{}, false
	}
	l := detectDocLang(st.sample.String())
	for _, f := range st.named {
		if p := phrase(l, f); p != "" && !slices.Contains(st.searched, p) {
			args, _ := json.Marshal(map[string]string{"text": p})
			return ncall{name: fixpoint.ToolSearch, args: string(args)}, true
		}
	}
	if len(st.items) <= readerItemsMax {
		for _, name := range st.items {
			if !slices.Contains(st.searched, name) {
				args, _ := json.Marshal(map[string]string{"text": name})
				return ncall{name: fixpoint.ToolSearch, args: string(args)}, true
			}
		}
	}
	for _, n := range st.found {
		if !st.readInPass[n] {
			return readCall(n), true
		}
	}
	if slices.Contains(st.named, docList) && (len(st.items) == 0 || len(st.items) > readerItemsMax) {
		for n := range st.of {
			if !st.readInPass[n] {
				return readCall(n), true
			}
		}
	}
	return ncall{}, false
}

// readerModel decides a reader's turn (see the comment at the top).
func (s *Server) readerModel(r *chatReq) agentTurn {
	st := readerWalk(r.msgs)
	t := agentTurn{plan: plan{turn: st.turns, key: taskKey(r, s.cfg.KeyByPrompt)}}
	if len(st.queue) == 0 {
		next, ok := st.nextStep()
		if !ok {
			next = ncall{name: fixpoint.ToolFinish, args: "{}"}
		}
		t.calls = []ncall{next}
		return t
	}
	head := st.queue[0]
	text, ok := st.texts[head]
	if !ok {
		t.calls = []ncall{readCall(head)} // its text was left out: read it again
		return t
	}
	p := s.readerPlan(r, st, head, text)
	t.plan.faults, t.plan.formats, t.plan.outcome = p.faults, p.formats, p.outcome
	// A nudged turn calls a tool when the request requires one (OpenAI,
	// Anthropic); where it cannot (Ollama), the nudge is a correction
	// like any, and its text faults are drawn afresh.
	forced := st.nudged && r.agent.choice != ""
	fresh := st.tries[head] == 0 && !forced
	tool := fixpoint.ToolUpdateOutput
	if !st.anySet {
		tool = fixpoint.ToolSetOutput
	}
	switch {
	case fresh && p.outcome == FaultRefusal:
		t.text = RefusalText
		return t
	case fresh && p.outcome == FaultEmpty:
		t.calls = []ncall{{name: fixpoint.ToolFinish, args: "{}"}}
		return t
	case fresh && (p.outcome == FaultTruncation):
		t.calls, t.truncated = []ncall{{name: tool, args: p.text}}, true
	case fresh && hasFault(p.formats, FaultProse):
		t.text = p.text
		return t
	default:
		t.calls = []ncall{{name: tool, args: string(encode(st.restrict(p.value, readDocument(text).fields), encOpts{}))}}
	}
	if next, ok := st.nextStep(); ok && len(st.queue) == 1 && next.name == fixpoint.ToolReadChunk {
		t.calls = append(t.calls, next)
	}
	return t
}

// readerPlan is the simulator's answer to a chunk call over text: a
// first attempt, or after a refused put the correction of that put by its
// result. A pass after the first draws afresh.
func (s *Server) readerPlan(r *chatReq, st *readerState, n int, text string) plan {
	mr := chatReq{provider: r.provider, model: r.model, system: r.system, user: r.user, maxTokens: r.maxTokens}
	if promptSchema(r) == nil {
		mr.schema = r.agent.params
	}
	first := fixpoint.DocumentOpen + "\n" + text + "\n" + fixpoint.DocumentClose
	if st.pass > 0 {
		first += "\n\n(chunk " + strconv.Itoa(n) + " read again, pass " + strconv.Itoa(st.pass+1) + ")"
	}
	mr.msgs = []nmsg{{role: "user", text: first}}
	switch {
	case st.tries[n] > 0:
		prev := st.lastArgs[n]
		if v, ok := parseReply(prev); !ok || reflect.DeepEqual(v, map[string]any{}) {
			// Nothing of the value was put (arguments cut, or sent
			// empty where a cut object cannot go): it is written afresh.
			prev = ""
		}
		mr.msgs = append(mr.msgs, nmsg{role: "assistant", text: prev}, nmsg{role: "user", text: st.lastErr[n]})
	case st.nudged:
		// The value the nudged turn puts: as a model asked again after a
		// reply with no usable value writes it.
		mr.msgs = append(mr.msgs, nmsg{role: "assistant", text: ""}, nmsg{role: "user", text: "Answer with tool calls only."})
	}
	return s.model(&mr)
}

// restrict is what of a chunk's value the reader puts: in the first pass
// the list, the fields the chunk's text states (held) and the fields the
// output still lacks; in a later one the fields the refused finish named
// only. A field the output has is not replaced by what a chunk that does
// not state it makes up.
func (st *readerState) restrict(v any, held map[string]docHit) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	out := make(map[string]any, len(m))
	for k, x := range m {
		switch {
		case st.pass > 0 && k == docList && len(st.items) > 0 && len(st.items) <= readerItemsMax:
			out[k] = namedOnly(x, st.items)
		case st.pass > 0:
			if slices.Contains(st.named, k) {
				out[k] = x
			}
		case k == docList || !st.anySet || slices.Contains(st.missing, k):
			out[k] = x
		case held[k].value != nil:
			out[k] = x
		}
	}
	return out
}

// namedOnly is the items of list whose name is one of names.
func namedOnly(list any, names []string) any {
	items, ok := list.([]any)
	if !ok {
		return list
	}
	out := []any{}
	for _, it := range items {
		if m, ok := it.(map[string]any); ok {
			if n, ok := m["name"].(string); ok && slices.Contains(names, n) {
				out = append(out, it)
			}
		}
	}
	return out
}
