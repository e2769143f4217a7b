package repair

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/chunk"
	"github.com/fixpoint-dev/fixpoint/internal/textclip"
	"github.com/fixpoint-dev/fixpoint/validate"
)

// agentToolNames are the agent's tools, in the order they are offered.
var agentToolNames = []string{fixpoint.ToolSetOutput, fixpoint.ToolUpdateOutput, fixpoint.ToolReadChunk,
	fixpoint.ToolSearch, fixpoint.ToolFinish, fixpoint.ToolFail}

// agentInstructions are the agent's rules, before the schema.
const agentInstructions = `You build one JSON value from a long document, with tools. The document is not in this conversation: read it with read_chunk (chunk numbers start at 0) and find passages with search. Build the value with set_output (the whole value) and update_output (a part: its properties are merged into the value; objects merge by property, list items are appended, an item with the key of one already listed is merged into it, other values are replaced). While you work the value may leave out required properties; every other rule of the schema holds at once, and a call that breaks one is refused with the errors. When the value is complete, call finish: it checks the value against the whole schema and the document, and returns what to fix. If the task cannot be done, call fail with the reason. Answer with tool calls only. Copy values as the document writes them; leave out what it does not state.
`

// agentSystemPrompt is the agent's system prompt: the user's own, the
// rules, the schema described in words, and the schema itself between
// the schema markers.
func agentSystemPrompt(job *Job) string {
	var b strings.Builder
	if job.System != "" {
		b.WriteString(strings.TrimSpace(job.System))
		b.WriteString("\n\n")
	}
	b.WriteString(agentInstructions)
	if desc := describeSchema(job.SchemaRaw); desc != "" {
		b.WriteString("\nThe value must be:\n")
		b.WriteString(desc)
	}
	b.WriteString("\n" + fixpoint.SchemaMarkerOpen + "\n")
	b.Write(compactJSON(job.SchemaRaw))
	b.WriteString("\n" + fixpoint.SchemaMarkerClose)
	return b.String()
}

// agentTools are the tools an agent request offers. set_output's
// parameters are the schema set_output checks (partial, or full under
// Limits.Strict); update_output's the partial schema, as its
// arguments are a part of the value.
func agentTools(job *Job, check *validate.Schema) []fixpoint.Tool {
	params := json.RawMessage(compactJSON(check.Raw()))
	partial := params
	if p, err := job.Schema.Partial(); err == nil && p != nil {
		partial = compactJSON(p.Raw())
	}
	obj := func(props string, required ...string) json.RawMessage {
		req := ""
		if len(required) > 0 {
			q, _ := json.Marshal(required)
			req = `,"required":` + string(q)
		}
		return json.RawMessage(`{"type":"object","properties":{` + props + `}` + req + `,"additionalProperties":false}`)
	}
	return []fixpoint.Tool{
		{Name: fixpoint.ToolSetOutput, Description: "Set the whole output value. The arguments are the value.", Parameters: params},
		{Name: fixpoint.ToolUpdateOutput, Description: "Merge a part into the output value: objects by property, list items appended (an item with the key of a listed one merged into it), other values replaced. The arguments are the part.", Parameters: partial},
		{Name: fixpoint.ToolReadChunk, Description: "Read chunk n of the document: its text and its place (code point offsets).", Parameters: obj(`"n":{"type":"integer","minimum":0}`, "n")},
		{Name: fixpoint.ToolSearch, Description: "Find a text in the document (letter case ignored): the passages holding it, with their chunk numbers and code point offsets.", Parameters: obj(`"text":{"type":"string","minLength":1}`, "text")},
		{Name: fixpoint.ToolFinish, Description: "Finish: the output is checked against the whole schema and the document. Errors come back to fix.", Parameters: obj(``)},
		{Name: fixpoint.ToolFail, Description: "Give up: the task cannot be done. Say why.", Parameters: obj(`"reason":{"type":"string"}`, "reason")},
	}
}

// outlineMax bounds the chunks the outline lists one by one.
const outlineMax = 200

// agentFirstMessages are the first request's messages: the task (the
// prompt, or the job's messages), its first user message followed by an
// outline of the document. The document itself is not sent: the agent
// reads it by the chunk.
func agentFirstMessages(job *Job, chunks []chunk.Chunk) []fixpoint.Message {
	msgs := slices.Clone(job.Messages)
	if len(msgs) == 0 {
		msgs = []fixpoint.Message{{Role: fixpoint.RoleUser, Content: job.Prompt}}
	}
	outline := documentOutline(job.Document, chunks)
	for i := range msgs {
		if msgs[i].Role == fixpoint.RoleUser {
			msgs[i].Content = strings.TrimRight(msgs[i].Content, "\n") + "\n\n" + outline
			break
		}
	}
	return msgs
}

// documentOutline describes the document without its text: its size, its
// chunks, and where each starts and how.
func documentOutline(doc string, chunks []chunk.Chunk) string {
	var b strings.Builder
	fmt.Fprintf(&b, "The document is not shown here: it has %d characters (about %d tokens) in %d chunks, numbered from 0. Read them with read_chunk.\n",
		utf8.RuneCountInString(doc), chunk.Tokens(doc), len(chunks))
	for _, c := range chunks[:min(len(chunks), outlineMax)] {
		first, _, _ := strings.Cut(strings.TrimSpace(c.Text), "\n")
		fmt.Fprintf(&b, "- chunk %d: code points %d to %d, about %d tokens, begins %s\n",
			c.N, c.Start, c.End, chunk.Tokens(c.Text), strconv.Quote(textclip.Runes(first, 60)))
	}
	if more := len(chunks) - outlineMax; more > 0 {
		fmt.Fprintf(&b, "- and %d more chunks\n", more)
	}
	return strings.TrimRight(b.String(), "\n")
}

// chunkHeader starts a read_chunk result: the chunk's number, the count,
// and its place.
func chunkHeader(c chunk.Chunk, of int) string {
	return fmt.Sprintf("chunk %d of %d, code points %d to %d:", c.N, of, c.Start, c.End)
}

// chunkText is read_chunk's result: the header, a blank line, the text.
func chunkText(chunks []chunk.Chunk, n int) string {
	return chunkHeader(chunks[n], len(chunks)) + "\n\n" + chunks[n].Text
}

// Bounds of a search's result.
const (
	searchHitsMax  = 20
	searchContext  = 100 // code points shown on each side of a hit
	searchQueryMax = 200 // code points of the text searched for
)

// searchDocument is search's result: each place the text occurs (letter
// case ignored), its code point offsets, the chunks holding it and the
// passage around it; at most searchHitsMax, and the count of the rest.
func searchDocument(doc string, chunks []chunk.Chunk, query string) string {
	query = textclip.Runes(strings.TrimSpace(query), searchQueryMax)
	// Lowering maps each code point to one code point, so offsets into the
	// lowered text are offsets into the document.
	low, q := strings.ToLower(doc), strings.ToLower(query)
	runes := []rune(doc)
	qn := utf8.RuneCountInString(q)
	var b strings.Builder
	hits, byteAt, runeAt := 0, 0, 0
	for {
		i := strings.Index(low[byteAt:], q)
		if i < 0 {
			break
		}
		runeAt += utf8.RuneCountInString(low[byteAt : byteAt+i])
		byteAt += i
		if hits < searchHitsMax {
			start, end := runeAt, runeAt+qn
			var in []string
			for _, c := range chunks {
				if c.Start <= start && end <= c.End {
					in = append(in, strconv.Itoa(c.N))
				}
			}
			from, to := max(0, start-searchContext), min(len(runes), end+searchContext)
			fmt.Fprintf(&b, "- code points %d to %d, chunk %s: %s\n", start, end, strings.Join(in, " and "), strconv.Quote(string(runes[from:to])))
		}
		hits++
		step := len(q)
		if step == 0 {
			step = 1
		}
		runeAt += utf8.RuneCountInString(low[byteAt : byteAt+step])
		byteAt += step
	}
	if hits == 0 {
		return fmt.Sprintf("no passage holds %s", strconv.Quote(query))
	}
	head := fmt.Sprintf("%d passages hold %s", hits, strconv.Quote(query))
	if hits > searchHitsMax {
		head += fmt.Sprintf("; the first %d:", searchHitsMax)
	} else {
		head += ":"
	}
	return head + "\n" + strings.TrimRight(b.String(), "\n")
}

// agentKeptTurns is how many of the latest turns keep the text of the
// chunks they read (the turn that reads a chunk, the one that puts what
// it found, one to fix a refused put); earlier read_chunk results keep
// their header only.
const agentKeptTurns = 3

// agentKeptArgs is the longest arguments of set_output and update_output
// calls before the last agentKeptTurns turns that are sent back whole.
const agentKeptArgs = 200

// agentElide is msgs as sent: the text of a chunk read before the last
// agentKeptTurns turns is left out (its header stays, and a line saying
// how to read it again), and so are the arguments of the set_output and
// update_output calls of those turns (an object saying how long they
// were takes their place). The value holds what was taken from them;
// keeping every chunk read and every value put would make a run over n
// chunks cost n² chunks of input.
func agentElide(msgs []fixpoint.Message, chunks []chunk.Chunk) []fixpoint.Message {
	turns := 0
	cut := -1
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == fixpoint.RoleAssistant {
			if turns++; turns == agentKeptTurns {
				cut = i
				break
			}
		}
	}
	if cut < 0 {
		return msgs
	}
	reads := map[string]bool{}
	out := slices.Clone(msgs)
	for i := range out[:cut] {
		for j, c := range out[i].ToolCalls {
			switch c.Name {
			case fixpoint.ToolReadChunk:
				reads[c.ID] = true
			case fixpoint.ToolSetOutput, fixpoint.ToolUpdateOutput:
				if len(c.Arguments) > agentKeptArgs {
					if &out[i].ToolCalls[0] == &msgs[i].ToolCalls[0] {
						out[i].ToolCalls = slices.Clone(out[i].ToolCalls)
					}
					out[i].ToolCalls[j].Arguments = fmt.Sprintf(`{"left_out":"%d bytes of arguments, left out of this conversation: the output holds what the call put"}`, len(c.Arguments))
				}
			}
		}
		if out[i].Role != fixpoint.RoleTool || !reads[out[i].ToolCallID] || out[i].IsError {
			continue
		}
		if head, _, ok := strings.Cut(out[i].Content, "\n\n"); ok && strings.HasPrefix(head, "chunk ") {
			out[i].Content = head + " [text left out of this conversation after it was read; call read_chunk again to see it]"
		}
	}
	return out
}
