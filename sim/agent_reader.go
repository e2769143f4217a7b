package sim

import (
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
// The first value is put with set_output. A value puts only what the
// output lacks: the list's items, and scalar fields no earlier put gave
// (a model does not replace a party it found on page 1 with what it
// makes of page 30). The mix's faults on a chunk's first put:
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
// A finish refused starts a new pass over the chunks from the first,
// drawn afresh, putting only the fields the refusal named. The reader's
// state is a function of the conversation (readerWalk): the tool results
// say which calls were taken, read_chunk's results the chunks' texts.

// readerTriesMax is how many puts of one chunk's value the reader makes
// before it leaves the chunk.
const readerTriesMax = 2

// chunkResultRE reads the header of a read_chunk result (package
// repair's chunkHeader): the chunk's number and the count.
var chunkResultRE = regexp.MustCompile(`^chunk (\d+) of (\d+), code points \d+ to \d+:`)

// readerState is where a reader's run is, read from its conversation.
type readerState struct {
	of       int            // the chunk count; 0 until a chunk was read
	texts    map[int]string // each chunk's text, where a result still shows it
	queue    []int          // chunks read whose value is not put yet, in order
	tries    map[int]int    // refused puts of a queued chunk
	lastArgs map[int]string // the last refused put of a chunk, and its result
	lastErr  map[int]string
	nextRead int             // the next chunk of this pass to read
	pass     int             // finishes refused so far
	named    []string        // the fields the last refused finish named
	set      map[string]bool // the fields a put that was taken gave
	anySet   bool
	nudged   bool // the last turn was a text answer
	turns    int
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
		lastErr: map[int]string{}, set: map[string]bool{}}
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
			case fixpoint.ToolSetOutput, fixpoint.ToolUpdateOutput:
				st.put(c.args, taken, res.content)
			case fixpoint.ToolFinish:
				if answered && res.isError {
					st.pass++
					st.named = namedFields(res.content)
					st.queue, st.nextRead, st.tries = nil, 0, map[int]int{}
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
	}
	if !slices.Contains(st.queue, n) {
		st.queue = append(st.queue, n)
	}
	st.nextRead = max(st.nextRead, n+1)
}

// put records a put of the queue's head: taken, or refused with result.
func (st *readerState) put(args string, taken bool, result string) {
	if len(st.queue) == 0 {
		return
	}
	head := st.queue[0]
	if taken {
		if v, ok := parseReply(args); ok {
			if m, ok := v.(map[string]any); ok {
				for k := range m {
					st.set[k] = true
				}
			}
		}
		st.anySet = true
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
var namedFieldRE = regexp.MustCompile(`/([A-Za-z_][A-Za-z0-9_]*)`)

func namedFields(text string) []string {
	var out []string
	for _, m := range namedFieldRE.FindAllStringSubmatch(text, -1) {
		if !slices.Contains(out, m[1]) {
			out = append(out, m[1])
		}
	}
	return out
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

// readerModel decides a reader's turn (see the comment at the top).
func (s *Server) readerModel(r *chatReq) agentTurn {
	st := readerWalk(r.msgs)
	t := agentTurn{plan: plan{turn: st.turns, key: taskKey(r, s.cfg.KeyByPrompt)}}
	read := func(n int) ncall {
		return ncall{name: fixpoint.ToolReadChunk, args: `{"n":` + strconv.Itoa(n) + `}`}
	}
	if len(st.queue) == 0 {
		switch {
		case st.of == 0:
			t.calls = []ncall{read(0)}
		case st.nextRead < st.of:
			t.calls = []ncall{read(st.nextRead)}
		default:
			t.calls = []ncall{{name: fixpoint.ToolFinish, args: "{}"}}
		}
		return t
	}
	head := st.queue[0]
	text, ok := st.texts[head]
	if !ok {
		t.calls = []ncall{read(head)} // its text was left out: read it again
		return t
	}
	p := s.readerPlan(r, st, head, text)
	t.plan.faults, t.plan.formats, t.plan.outcome = p.faults, p.formats, p.outcome
	fresh := st.tries[head] == 0 && !st.nudged
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
		t.calls = []ncall{{name: tool, args: string(encode(st.restrict(p.value), encOpts{}))}}
	}
	if len(st.queue) == 1 && st.nextRead < st.of {
		t.calls = append(t.calls, read(st.nextRead))
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
		mr.msgs = append(mr.msgs, nmsg{role: "assistant", text: st.lastArgs[n]}, nmsg{role: "user", text: st.lastErr[n]})
	case st.nudged:
		// The value the nudged turn puts: as a model asked again after a
		// reply with no usable value writes it.
		mr.msgs = append(mr.msgs, nmsg{role: "assistant", text: ""}, nmsg{role: "user", text: "Answer with tool calls only."})
	}
	return s.model(&mr)
}

// restrict is what of a chunk's value the reader puts: in the first pass
// the list and the fields no put gave yet; in a later one the fields the
// refused finish named only.
func (st *readerState) restrict(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	out := make(map[string]any, len(m))
	for k, x := range m {
		switch {
		case st.pass > 0:
			if slices.Contains(st.named, k) {
				out[k] = x
			}
		case k == docList || !st.set[k]:
			out[k] = x
		}
	}
	return out
}
