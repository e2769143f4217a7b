package repair

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/extract"
	"github.com/fixpoint-dev/fixpoint/subschema"
)

// SystemPrompt is the system prompt a job's attempts start with: the user's
// own, then (in prompt mode) the rules, the schema described in words and
// the schema itself.
func SystemPrompt(job *Job) string { return systemPrompt(job) }

// systemPrompt builds the system prompt for a job. In prompt mode it states
// the rules and describes the schema in words, then gives the schema itself;
// in the other modes the provider enforces the schema and the prompt only
// asks for the value.
func systemPrompt(job *Job) string {
	var b strings.Builder
	if job.System != "" {
		b.WriteString(strings.TrimSpace(job.System))
		b.WriteString("\n\n")
	}
	if job.Mode != fixpoint.ModePrompt {
		b.WriteString("Answer with the structured result only.")
		return b.String()
	}
	b.WriteString("Reply with exactly one JSON value that matches the JSON Schema below, and nothing else: ")
	b.WriteString("no prose before or after it, no code fences, no comments, no trailing commas. ")
	b.WriteString("Use double quotes for every key and string. Include every required property; ")
	b.WriteString("do not add properties the schema does not list.\n")
	if desc := describeSchema(job.SchemaRaw); desc != "" {
		b.WriteString("\nThe value must be:\n")
		b.WriteString(desc)
	}
	b.WriteString("\n")
	b.WriteString(fixpoint.SchemaMarkerOpen)
	b.WriteString("\n")
	b.Write(compactJSON(job.SchemaRaw))
	b.WriteString("\n")
	b.WriteString(fixpoint.SchemaMarkerClose)
	return b.String()
}

func compactJSON(raw json.RawMessage) []byte {
	var buf strings.Builder
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return raw
	}
	out, err := json.Marshal(v)
	if err != nil {
		return raw
	}
	buf.Write(out)
	return []byte(buf.String())
}

// The description of a schema is bounded: it stops where a reference loops
// back to a node being described, below describeMaxHops nested arrays or
// objects, and before describeMaxBytes, each time with a note sending the
// model to the schema block, which is always given in full.
const (
	// describeMaxBytes bounds the description, notes included.
	describeMaxBytes = 16 << 10
	// describeMaxHops bounds the nesting the description follows: items and
	// properties alike (properties stop at depth 3 before that).
	describeMaxHops = 32

	recursiveNote = "(recursive: see the schema below)"
	deepNote      = "(nested deeper: see the schema below)"
	cutNote       = "(the description stops here: see the schema below)"
)

// describeSchema writes a short bullet list of what the schema asks for, in
// words a model follows. It covers the common keywords and stops at depth 3;
// the schema block that follows is the full contract. It is cycle-safe and
// bounded (see describeMaxBytes).
func describeSchema(raw json.RawMessage) string {
	var s map[string]any
	if err := json.Unmarshal(raw, &s); err != nil {
		return ""
	}
	d := describer{doc: subschema.NewDoc(s), onPath: map[string]bool{}}
	d.line("- " + d.node(s))
	d.props(s, "", "", 1, 0)
	return d.b.String()
}

// describer writes the description of one schema.
type describer struct {
	doc *subschema.Doc
	b   strings.Builder
	// onPath holds the JSON pointers of the nodes being described, from the
	// root to the current one: a reference to one of them loops.
	onPath map[string]bool
	// full is set once the description stopped at describeMaxBytes.
	full bool
}

// line writes one line unless the description is full; the line that would
// cross describeMaxBytes is replaced by cutNote, and nothing follows it.
func (d *describer) line(text string) {
	if d.full {
		return
	}
	const cut = "- " + cutNote + "\n"
	if d.b.Len()+len(text)+1+len(cut) > describeMaxBytes {
		d.b.WriteString(cut)
		d.full = true
		return
	}
	d.b.WriteString(text)
	d.b.WriteByte('\n')
}

// props describes the properties of s, found at ptr, and of the items of an
// array, one line each, at the given depth; hops counts the nodes entered on
// the way, items included.
func (d *describer) props(s map[string]any, ptr, prefix string, depth, hops int) {
	if depth > 3 || d.full {
		return
	}
	s, ptr = d.target(s, ptr)
	d.onPath[ptr] = true
	defer delete(d.onPath, ptr)
	props, _ := s["properties"].(map[string]any)
	if items, ok := s["items"].(map[string]any); ok {
		items, iptr := d.target(items, ptr+"/items")
		if _, ok := items["properties"]; ok {
			switch {
			case d.onPath[iptr]:
				d.line(strings.Repeat("  ", depth) + "- `" + prefix + "[]` " + recursiveNote)
			case hops >= describeMaxHops:
				d.line(strings.Repeat("  ", depth) + "- `" + prefix + "[]` " + deepNote)
			default:
				d.props(items, iptr, prefix+"[]", depth, hops+1)
			}
		}
		return
	}
	req := map[string]bool{}
	if r, ok := s["required"].([]any); ok {
		for _, x := range r {
			if name, ok := x.(string); ok {
				req[name] = true
			}
		}
	}
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if d.full {
			return
		}
		child, _ := props[name].(map[string]any)
		cptr := ptr + "/properties/" + extract.PointerToken(name)
		path := prefix + "." + name
		if prefix == "" {
			path = name
		}
		flag := "optional"
		if req[name] {
			flag = "required"
		}
		text := strings.Repeat("  ", depth) + "- `" + path + "` (" + flag + "): " + d.node(child)
		target, tptr := d.target(child, cptr)
		switch {
		case d.onPath[tptr] && d.expandable(target):
			d.line(text + " " + recursiveNote)
		case hops >= describeMaxHops && d.expandable(target):
			d.line(text + " " + deepNote)
		default:
			d.line(text)
			d.props(child, cptr, path, depth+1, hops+1)
		}
	}
}

// expandable reports whether describing s would write lines below it: it
// has properties, or items that have.
func (d *describer) expandable(s map[string]any) bool {
	if items, ok := s["items"].(map[string]any); ok {
		items, _ = d.target(items, "")
		_, ok := items["properties"]
		return ok
	}
	props, _ := s["properties"].(map[string]any)
	return len(props) > 0
}

// target follows the local references of s, found at the JSON pointer ptr
// ("#" and "#/...", resolved as the validator resolves them), and returns
// the schema object it ends at and that object's pointer. A reference
// through an "$id" or an anchor is not followed: the words name it (see
// node). A chain that loops, or that ends at a reference naming nothing or
// at a boolean schema, ends where it stops.
func (d *describer) target(s map[string]any, ptr string) (map[string]any, string) {
	n, ok := d.doc.NodeOf(s)
	if !ok {
		return s, ptr
	}
	end, _ := d.doc.Deref(n, subschema.IsPointerRef)
	if obj := end.Object(); obj != nil {
		return obj, end.Ptr
	}
	return s, ptr
}

// node describes the schema s in words, after its local references.
func (d *describer) node(s map[string]any) string {
	s, _ = d.target(s, "")
	return describeNode(s)
}

// describeNode describes the schema object s in words.
func describeNode(s map[string]any) string {
	if s == nil {
		return "any JSON value"
	}
	var parts []string
	if t, ok := s["type"]; ok {
		parts = append(parts, typeWords(t))
	} else if _, ok := s["properties"]; ok {
		parts = append(parts, "an object")
	}
	if e, ok := s["enum"].([]any); ok {
		parts = append(parts, "one of "+jsonList(e))
	}
	if c, ok := s["const"]; ok {
		parts = append(parts, "exactly "+jsonText(c))
	}
	for _, kw := range []struct{ key, words string }{
		{"minimum", "at least"}, {"maximum", "at most"},
		{"exclusiveMinimum", "greater than"}, {"exclusiveMaximum", "less than"},
		{"multipleOf", "a multiple of"},
		{"minLength", "at least %s characters"}, {"maxLength", "at most %s characters"},
		{"minItems", "at least %s items"}, {"maxItems", "at most %s items"},
	} {
		if v, ok := s[kw.key]; ok {
			n := jsonText(v)
			if strings.Contains(kw.words, "%s") {
				parts = append(parts, fmt.Sprintf(kw.words, n))
			} else {
				parts = append(parts, kw.words+" "+n)
			}
		}
	}
	if p, ok := s["pattern"].(string); ok {
		parts = append(parts, "matching the regular expression "+strconv.Quote(p))
	}
	if f, ok := s["format"].(string); ok {
		parts = append(parts, "in "+f+" format")
	}
	if u, ok := s["uniqueItems"].(bool); ok && u {
		parts = append(parts, "items unique")
	}
	if ap, ok := s["additionalProperties"].(bool); ok && !ap {
		if pp, _ := s["patternProperties"].(map[string]any); len(pp) > 0 {
			parts = append(parts, "no other properties than those its patternProperties in the schema below allow")
		} else {
			parts = append(parts, "no other properties")
		}
	}
	// A reference not followed here ("item.json" under an $id, "#name"
	// of an $anchor) is not "any JSON value": the validator follows it.
	for _, kw := range []string{"$ref", "$dynamicRef"} {
		if ref, ok := s[kw].(string); ok && !subschema.IsPointerRef(ref) {
			parts = append(parts, "as its "+kw+" "+strconv.Quote(ref)+" in the schema below defines it")
		}
	}
	// Combinators are not spelt out here, but they are not "any JSON
	// value" either: that contradicted the schema given below the words.
	for _, kw := range []struct{ key, words string }{
		{"anyOf", "matching at least one of its anyOf alternatives in the schema below"},
		{"oneOf", "matching exactly one of its oneOf alternatives in the schema below"},
		{"allOf", "matching every part of its allOf in the schema below"},
		{"not", "not matching its not schema in the schema below"},
		{"if", "following its if/then/else in the schema below"},
	} {
		if _, ok := s[kw.key]; ok {
			parts = append(parts, kw.words)
		}
	}
	if d, ok := s["description"].(string); ok && d != "" {
		parts = append(parts, "("+d+")")
	}
	if len(parts) == 0 {
		return "any JSON value"
	}
	return strings.Join(parts, ", ")
}

func typeWords(t any) string {
	words := map[string]string{
		"object": "an object", "array": "an array", "string": "a string",
		"integer": "an integer", "number": "a number", "boolean": "true or false", "null": "null",
	}
	switch t := t.(type) {
	case string:
		if w, ok := words[t]; ok {
			return w
		}
		return t
	case []any:
		var ws []string
		for _, x := range t {
			if s, ok := x.(string); ok {
				ws = append(ws, typeWords(s))
			}
		}
		return strings.Join(ws, " or ")
	}
	return "any JSON value"
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func jsonList(vs []any) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = jsonText(v)
	}
	return strings.Join(parts, ", ")
}

// feedback writes the correction for a failed attempt in the job's format.
// Feedback is the correction a reply with errs (of class class) is sent,
// in format: what a step sends after a failed attempt.
func Feedback(format fixpoint.FeedbackFormat, class string, errs []fixpoint.ValidationError) string {
	return feedback(format, &fixpoint.Attempt{Class: class, Errors: errs}, true)
}

func feedback(format fixpoint.FeedbackFormat, a *fixpoint.Attempt, truncationNote bool) string {
	switch {
	case a.Class == fixpoint.OutcomeTruncated:
		if truncationNote {
			return "Your reply was cut off at the output token limit before the JSON value was complete. Reply again with a shorter, complete JSON value only."
		}
		return "Your reply was cut off before the JSON value was complete. Reply again with the complete JSON value only."
	case a.Class == fixpoint.OutcomeRefusal:
		return "This is a data-processing task with a fixed output format. Reply with the JSON value for the task only."
	case format == fixpoint.FeedbackVague:
		return "Your reply was not valid. Please try again and reply with valid JSON only."
	}
	errs := a.Errors
	// A syntax-class error is about how the reply is written (no JSON, a
	// value cut short, two answers, a key twice), not the schema.
	lead := "Your reply did not match the JSON Schema. "
	switch a.Class {
	case string(fixpoint.ClassSyntax):
		lead = "Your reply could not be used as it was written. "
	case string(fixpoint.ClassEvidence):
		lead = "Your reply states values the source does not hold. "
	}
	if format == fixpoint.FeedbackXML {
		return lead + "Fix every error below and reply with the corrected JSON value only.\n" +
			fixesNote(a) + xmlErrors(errs)
	}
	var b strings.Builder
	b.WriteString(lead)
	b.WriteString("Fix every error below and reply with the corrected JSON value only:\n")
	b.WriteString(fixesNote(a))
	b.WriteString(textErrors(errs))
	return strings.TrimRight(b.String(), "\n")
}

// fixesNoteMax bounds the fixes fixesNote lists.
const fixesNoteMax = 10

// fixesNote says how a reply was read when schema-guided repairs were made
// to it before its errors were found, or "": the errors' pointers are in
// the value as read (a renamed key under its new name), and an error a fix
// revealed ("1" read as 1 makes two equal items) is about the value as
// read. The model, shown its reply as written, was told of pointers that
// were not in it.
func fixesNote(a *fixpoint.Attempt) string {
	if a.Coerced <= 0 || a.Coerced > len(a.Repairs) || len(a.Errors) == 0 {
		return ""
	}
	fixes := a.Repairs[len(a.Repairs)-a.Coerced:]
	var b strings.Builder
	b.WriteString("Your reply was read with these fixes before it was checked; the errors refer to the value as read:\n")
	for _, f := range fixes[:min(len(fixes), fixesNoteMax)] {
		at := pointerOrRoot(f.Pointer)
		switch f.Kind {
		case KindRenameKey:
			fmt.Fprintf(&b, "- the key %s was read as %s (%s)\n", f.Before, f.After, at)
		case KindDropNull, KindDropAdditional:
			fmt.Fprintf(&b, "- %s (%s) was left out\n", at, f.Before)
		default:
			fmt.Fprintf(&b, "- %s: %s was read as %s\n", at, f.Before, f.After)
		}
	}
	if more := len(fixes) - fixesNoteMax; more > 0 {
		fmt.Fprintf(&b, "- and %d more\n", more)
	}
	return b.String()
}

// FeedbackErrorsMax is how many errors one feedback message lists; the
// rest are counted by keyword. A reply with 3,000 properties the schema
// does not allow made a 134 KB message, paid for as input on every
// repair; the attempt keeps every error in the ledger.
const FeedbackErrorsMax = 50

// textErrors is the numbered list of errors of the text feedback format,
// each line ending in a newline.
func textErrors(errs []fixpoint.ValidationError) string {
	var b strings.Builder
	shown, rest := shownErrors(errs)
	for i, e := range shown {
		fmt.Fprintf(&b, "%d. %s\n", i+1, e.Message)
	}
	if more := errorCount(errs) - len(shown); more > 0 {
		fmt.Fprintf(&b, "... and %d more errors of the same kinds (%s): fix them the same way.\n", more, keywordCounts(rest))
	}
	return b.String()
}

// xmlErrors is the <validation-errors> block of the xml feedback format.
func xmlErrors(errs []fixpoint.ValidationError) string {
	var b strings.Builder
	b.WriteString("<validation-errors>\n")
	shown, rest := shownErrors(errs)
	for _, e := range shown {
		fmt.Fprintf(&b, "<error path=%q keyword=%q>%s</error>\n", pointerOrRoot(e.Path), e.Keyword, xmlEscape(e.Message))
	}
	if more := errorCount(errs) - len(shown); more > 0 {
		fmt.Fprintf(&b, "<more-errors count=\"%d\">%s: fix them the same way</more-errors>\n", more, xmlEscape(keywordCounts(rest)))
	}
	b.WriteString("</validation-errors>")
	return b.String()
}

// shownErrors picks the FeedbackErrorsMax errors a feedback lists, in
// their order: the first of each keyword, then the first of the rest, so
// that "more errors of the same kinds" are of kinds the model was shown
// (2,000 type errors first hid 500 missing properties behind a count). rest
// is the others, the moreErrors count among them.
func shownErrors(errs []fixpoint.ValidationError) (shown, rest []fixpoint.ValidationError) {
	if len(errs) <= FeedbackErrorsMax && (len(errs) == 0 || errs[len(errs)-1].Keyword != KeywordMoreErrors) {
		return errs, nil
	}
	return pickErrors(errs, FeedbackErrorsMax)
}

// keywordCounts says how many of errs have each keyword, most first:
// "additionalProperties 2950, type 3".
func keywordCounts(errs []fixpoint.ValidationError) string {
	n := map[string]int{}
	for _, e := range errs {
		if e.Keyword != KeywordMoreErrors {
			n[e.Keyword]++
			continue
		}
		// The errors not kept, counted by keyword in its message (see
		// keepErrors): "2001 more errors, not kept: required 1100, type 901".
		_, counts, _ := strings.Cut(e.Message, ": ")
		for _, part := range strings.Split(counts, ", ") {
			kw, num, ok := strings.Cut(part, " ")
			if c, err := strconv.Atoi(num); ok && err == nil {
				n[kw] += c
			}
		}
	}
	keys := slices.Collect(maps.Keys(n))
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(n[b]-n[a], strings.Compare(a, b)) })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, n[k])
	}
	return strings.Join(parts, ", ")
}

func pointerOrRoot(p string) string {
	if p == "" {
		return "/"
	}
	return p
}

func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// repairMessage is the single user turn of a repair-strategy round: the
// original task, only the latest failed reply, and its errors.
func repairMessage(task, raw, fb string) string {
	var b strings.Builder
	b.WriteString(fixpoint.TaskOpen + "\n")
	b.WriteString(task)
	b.WriteString("\n" + fixpoint.TaskClose + "\n\nYour previous reply to this task was not accepted:\n")
	b.WriteString(fixpoint.PreviousReplyOpen)
	b.WriteString("\n")
	b.WriteString(raw)
	b.WriteString("\n")
	b.WriteString(fixpoint.PreviousReplyClose)
	b.WriteString("\n\n")
	b.WriteString(fb)
	return b.String()
}

// withDocument is msgs with doc in the first user message, before its
// text: between DocumentOpen and DocumentClose, each on a line of its
// own, byte for byte. The document comes first, the task after it, as
// providers advise for long inputs; a repair-strategy round repeats the
// message whole, document included, as the task.
func withDocument(msgs []fixpoint.Message, doc string) []fixpoint.Message {
	out := slices.Clone(msgs)
	for i := range out {
		if out[i].Role == fixpoint.RoleUser {
			out[i].Content = documentMessage(doc, out[i].Content)
			break
		}
	}
	return out
}

// documentMessage is the text of a first user message that gives doc
// with the task text.
func documentMessage(doc, text string) string {
	var b strings.Builder
	b.Grow(len(doc) + len(text) + len(fixpoint.DocumentOpen) + len(fixpoint.DocumentClose) + 4)
	b.WriteString(fixpoint.DocumentOpen)
	b.WriteByte('\n')
	b.WriteString(doc)
	b.WriteByte('\n')
	b.WriteString(fixpoint.DocumentClose)
	b.WriteString("\n\n")
	b.WriteString(text)
	return b.String()
}

// withoutDocument is msgs with the text of doc, wherever a message gives
// it between the document markers, replaced by note, or when note is ""
// a line naming its size: what an attempt keeps of the messages it sent.
func withoutDocument(msgs []fixpoint.Message, doc, note string) []fixpoint.Message {
	if note == "" {
		note = documentPlaceholder(len(doc))
	}
	block := fixpoint.DocumentOpen + "\n" + doc + "\n" + fixpoint.DocumentClose
	short := fixpoint.DocumentOpen + "\n" + note + "\n" + fixpoint.DocumentClose
	out := slices.Clone(msgs)
	for i := range out {
		out[i].Content = strings.Replace(out[i].Content, block, short, 1)
	}
	return out
}

// documentPlaceholder stands for a document of n bytes in the messages an
// attempt keeps.
func documentPlaceholder(n int) string {
	return fmt.Sprintf("[the job's document, %d bytes: stored once in the ledger's documents, under the job's document_hash]", n)
}
