package repair

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	sjson "github.com/segmentio/encoding/json"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/extract"
	"github.com/fixpoint-dev/fixpoint/validate"
)

// The patch strategy (StrategyPatch).
//
// After an attempt whose reply gave a JSON value that fails the schema
// (class shape or semantic), the next request is a patch request: the
// system prompt and the task's messages exactly as in the first attempt
// (the cached prefix), then one user turn, patchRequest: the value in a
// ```json block (between PreviousReplyOpen and PreviousReplyClose, where
// the simulator looks for a previous reply), its errors in the job's
// feedback format, and the ask for an RFC 6902 JSON Patch touching only
// the failing locations.
//
// The reply to a patch request is handled by feedPatch: the first JSON
// array extract finds in it (not a truncated one) is decoded as a patch,
// each operation's path (and from, for move and copy) is checked against
// the errors' subtrees (inScope), and the patch is applied to the value
// shown, as bytes (number text and key order kept), then the result is
// validated. The attempt records the patch (Attempt.Patch) and how it went
// (Attempt.PatchOutcome):
//
//   - applied: the attempt's value is the patched value, its errors the
//     patched value's; its repairs are those extract made to the patch
//     text, then one of kind RepairJSONPatch at the array's offset. Valid
//     when the patched value validates (RepairedLocally when extract had
//     to repair the patch text). Still invalid: the next request is a
//     patch request for the patched value and its new errors.
//   - parse_error (no array, or not a patch), out_of_scope (an operation
//     outside the errors' subtrees), apply_error (the patch does not apply,
//     e.g. a path that does not exist or a failed test): the value is
//     unchanged, so the attempt's value and errors are the value's it was
//     asked to patch, and its class theirs. The next request is a full
//     re-ask: StrategyRepair's message, with the value shown as the
//     previous reply and as feedback a note saying why the patch was not
//     used, then the feedback for the value's errors. The re-ask never
//     says "JSON Patch": the simulator answers a correction saying it with
//     a patch.
//
// An empty patch ([]) applies and changes nothing. Negative array indexes
// (not RFC 6902) do not apply, nor does any patch to a value that is not an
// object or an array; copies may add at most patchCopyLimit bytes. With
// feedback vague the patch request names no error, but the scope is still
// the errors'.
//
// A cut-off or refused reply is never accepted (as for any attempt), even
// when its patch applied; after one the next request is that full re-ask
// too, showing the value from before the patch. After an attempt with no
// value (syntax, truncated, refusal) the next request is StrategyRepair's,
// unchanged. Every attempt counts against MaxAttempts the same way.
//
// Rebuilding (Start from recorded attempts) needs only what the ledger
// keeps: each attempt's Feedback and Errors (and Class, for the token
// limit). A Feedback starting with PatchRequestLead is a patch request: the
// value to patch is read back from its ```json block, the scope from that
// attempt's Errors; any other Feedback is a full re-ask, which shows the
// value of the patch request before it when the attempt answered one, or
// the attempt's Raw. Value, Repairs, Patch and PatchOutcome are not needed.

// PatchPhrase is the phrase every patch request holds (the simulator
// answers a correction holding it with a patch); PatchRequestLead, the first
// line of every patch request and of no other feedback, tells a patch
// request from a re-ask when a step is rebuilt from its attempts.
const (
	PatchPhrase      = "RFC 6902 JSON Patch"
	PatchRequestLead = "Correct your previous JSON value with an " + PatchPhrase + "."
)

// RepairJSONPatch is the kind of the repair an applied patch adds to its
// attempt's repairs, at the offset of the patch in the reply.
const RepairJSONPatch = "json_patch"

// patchCopyLimit bounds how much a patch's copy operations may add, in
// bytes: a few copies of a value into itself double it each time.
const patchCopyLimit = 1 << 20

// patchState is the value an outstanding (or next) patch request asks to
// patch: its JSON text as shown to the model, and its errors (the scope).
type patchState struct {
	value []byte
	errs  []fixpoint.ValidationError
}

// patchReply is what feedPatch made of a reply to a patch request.
type patchReply struct {
	valid  bool
	shown  []byte // the patched value's text (applied only)
	reason string // why the patch was not used, for the re-ask
	// localRepairs counts extract's repairs of the patch text.
	localRepairs int
}

// feedPatch handles the reply text of a patch request (see the comment at
// the top of this file) and records it on a.
func (s *Step) feedPatch(a *fixpoint.Attempt, text string) patchReply {
	p := s.patch
	fail := func(outcome fixpoint.PatchOutcome, reason string) patchReply {
		a.PatchOutcome = outcome
		a.Errors = append([]fixpoint.ValidationError(nil), p.errs...)
		a.Value = canonicalValue(p.value)
		return patchReply{reason: reason}
	}
	cands, _ := extract.Extract(text)
	// The patch is the first array of operations ({"op": ...} objects);
	// failing that, the first array, which decodePatch refuses by name.
	// Other arrays in the prose ("Errors fixed: [...]", a citation [1])
	// are not patches.
	var cand *extract.Candidate
	for i := range cands {
		if _, ok := cands[i].Value.([]any); ok && !cands[i].Truncated && (cand == nil || !patchLike(cand.Value) && patchLike(cands[i].Value)) {
			cand = &cands[i]
		}
	}
	if cand == nil {
		return fail(fixpoint.PatchParseError, "your reply held no JSON array of operations")
	}
	a.Source = cand.Source
	a.Repairs = append([]fixpoint.Repair(nil), cand.Repairs...)
	for _, r := range cand.Repairs {
		if extract.Lossy(r.Kind) {
			// A patch read by dropping or guessing part of it may not say
			// what the model meant: 1 500 read as 1.
			return fail(fixpoint.PatchParseError, "your patch has "+validate.DescribeLossy(text, r))
		}
	}
	// A key written twice or half a surrogate pair: the patch read may
	// not be the one written.
	if errs := validate.ExtractionErrors(text, cand); len(errs) > 0 {
		return fail(fixpoint.PatchParseError, "in your patch, "+errs[0].Message)
	}
	// Two patches ("Wrong: [...] Corrected: [...]"): which one was meant
	// is not for us to guess.
	for i := range cands {
		o := &cands[i]
		if !patchLike(o.Value) || o == cand || (o.Start < cand.End && cand.Start < o.End) || extract.SameValue(o.Value, cand.Value) {
			continue
		}
		return fail(fixpoint.PatchParseError, fmt.Sprintf("your reply holds more than one JSON array, at offsets %d and %d; reply with only the patch meant",
			min(o.Start, cand.Start), max(o.Start, cand.Start)))
	}
	patch, err := decodePatch(cand.JSON)
	if err != nil {
		return fail(fixpoint.PatchParseError, err.Error())
	}
	a.Patch = string(cand.JSON)
	if loc, ok := inScope(patch, p.errs); !ok {
		return fail(fixpoint.PatchOutOfScope, fmt.Sprintf("it changes %s, where there is no error", loc))
	}
	opts := jsonpatch.NewApplyOptions()
	opts.SupportNegativeIndices = false // RFC 6902: no negative indexes
	opts.AccumulatedCopySizeLimit = patchCopyLimit
	opts.EscapeHTML = false
	out, err := patch.ApplyWithOptions(p.value, opts)
	if err != nil {
		return fail(fixpoint.PatchApplyError, "it does not apply to the value: "+oneLine(err.Error()))
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, out); err != nil {
		return fail(fixpoint.PatchApplyError, "it does not apply to the value: "+oneLine(err.Error()))
	}
	v, err := decodeValue(buf.Bytes())
	if err != nil {
		return fail(fixpoint.PatchApplyError, "it does not apply to the value: "+oneLine(err.Error()))
	}
	a.PatchOutcome = fixpoint.PatchApplied
	// The patched value gets the same schema-guided repairs as a reply's.
	v, fixes, errs := Coerce(s.job.Schema, v, s.lim.Coerce)
	errs = append(validate.StorableErrors(v), errs...)
	a.Errors = errs
	a.Value = marshalValue(v)
	a.Repairs = append(a.Repairs, fixpoint.Repair{Kind: RepairJSONPatch, Offset: cand.Start})
	a.Repairs = append(a.Repairs, fixes...)
	a.Coerced = len(fixes)
	shown := buf.Bytes()
	if len(fixes) > 0 {
		shown = a.Value
	}
	return patchReply{valid: len(a.Errors) == 0, shown: shown, localRepairs: len(cand.Repairs) + len(fixes)}
}

// patchLike reports whether v is a non-empty array of objects that each
// have an "op": what a JSON Patch looks like.
func patchLike(v any) bool {
	ops, ok := v.([]any)
	if !ok || len(ops) == 0 {
		return false
	}
	for _, op := range ops {
		m, ok := op.(map[string]any)
		if !ok {
			return false
		}
		if _, ok := m["op"]; !ok {
			return false
		}
	}
	return true
}

// decodePatch decodes text (a JSON array) as an RFC 6902 patch whose paths
// are all JSON pointers.
func decodePatch(text []byte) (jsonpatch.Patch, error) {
	patch, err := jsonpatch.DecodePatch(text)
	if err != nil {
		return nil, fmt.Errorf("your reply is not a valid patch: %s", oneLine(err.Error()))
	}
	for i, op := range patch {
		for _, loc := range opLocations(op) {
			if !validPointer(loc) {
				return nil, fmt.Errorf("operation %d: %q is not a JSON pointer", i+1, loc)
			}
		}
	}
	return patch, nil
}

// opLocations are the locations an operation touches: its path, and its
// from for move and copy.
func opLocations(op jsonpatch.Operation) []string {
	path, _ := op.Path()
	locs := []string{path}
	if k := op.Kind(); k == "move" || k == "copy" {
		from, _ := op.From()
		locs = append(locs, from)
	}
	return locs
}

// validPointer reports whether p is an RFC 6901 JSON pointer.
func validPointer(p string) bool {
	if p != "" && p[0] != '/' {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] == '~' && (i+1 == len(p) || p[i+1] != '0' && p[i+1] != '1') {
			return false
		}
	}
	return true
}

// inScope reports whether every location the patch touches (each
// operation's path, and from for move and copy) lies within the errors'
// subtrees: equal to an error's pointer or under it. For a "required" error
// the pointer is where the missing property goes, so an add there is in
// scope; an error on the root ("") puts everything in scope. It returns the
// first location out of scope.
func inScope(patch jsonpatch.Patch, errs []fixpoint.ValidationError) (string, bool) {
	for _, e := range errs {
		if e.Path == "" {
			return "", true
		}
	}
	within := func(loc string) bool {
		for _, e := range errs {
			if loc == e.Path || strings.HasPrefix(loc, e.Path+"/") {
				return true
			}
		}
		return false
	}
	for _, op := range patch {
		for _, loc := range opLocations(op) {
			if !within(loc) {
				return pointerOrRoot(loc), false
			}
		}
	}
	return "", true
}

// decodeValue decodes one JSON value, numbers as json.Number.
func decodeValue(text []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("more than one JSON value")
	}
	return v, nil
}

// marshalValue is an attempt's Value as Feed records any attempt's: the
// decoded value marshalled again.
func marshalValue(v any) json.RawMessage {
	b, err := sjson.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

// canonicalValue is marshalValue of the value text shows.
func canonicalValue(text []byte) json.RawMessage {
	v, err := decodeValue(text)
	if err != nil {
		return nil
	}
	return marshalValue(v)
}

// oneLine puts a library's error message on one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// hasValue reports whether a failed attempt's reply gave a JSON value to
// patch: its errors are the schema's, not extraction's.
func hasValue(a *fixpoint.Attempt) bool {
	return a.Class == string(fixpoint.ClassShape) || a.Class == string(fixpoint.ClassSemantic)
}

// patchFeedback is the Feedback of a failed attempt under StrategyPatch
// (see the comment at the top of this file): shown is the value the reply
// gave (or the patch made), nil when none; r is what feedPatch made of the
// reply, when the attempt answered a patch request (s.patch is set).
func (s *Step) patchFeedback(a *fixpoint.Attempt, shown []byte, r *patchReply, truncNote bool) string {
	format := s.lim.Feedback
	if s.patch == nil {
		if hasValue(a) && shown != nil {
			return patchRequest(format, shown, a.Errors)
		}
		return feedback(format, a, truncNote)
	}
	if a.PatchOutcome == fixpoint.PatchApplied && hasValue(a) {
		return patchRequest(format, shown, a.Errors)
	}
	reason := r.reason
	switch {
	case a.Class == fixpoint.OutcomeTruncated:
		reason = "your reply was cut off at the output token limit"
	case a.Class == fixpoint.OutcomeRefusal:
		reason = "your reply gave no patch"
	}
	errs := s.patch.errs
	value := &fixpoint.Attempt{Class: string(validate.ClassOf(errs)), Errors: errs}
	return "Your patch could not be used: " + reason + ". Reply with the whole corrected JSON value instead.\n" +
		feedback(format, value, truncNote)
}

// patchRequest is the user turn of a patch request.
func patchRequest(format fixpoint.FeedbackFormat, value []byte, errs []fixpoint.ValidationError) string {
	var b strings.Builder
	b.WriteString(PatchRequestLead)
	b.WriteString("\n\nYour previous reply gave this JSON value:\n")
	b.WriteString(fixpoint.PreviousReplyOpen)
	b.WriteString("\n```json\n")
	b.Write(value)
	b.WriteString("\n```\n")
	b.WriteString(fixpoint.PreviousReplyClose)
	b.WriteString("\n\n")
	switch format {
	case fixpoint.FeedbackVague:
		b.WriteString("It is not valid.\n")
	case fixpoint.FeedbackXML:
		b.WriteString("It does not match the JSON Schema:\n")
		b.WriteString(xmlErrors(errs))
		b.WriteString("\n")
	default:
		b.WriteString("It does not match the JSON Schema:\n")
		b.WriteString(strings.TrimRight(textErrors(errs), "\n"))
		b.WriteString("\n")
	}
	b.WriteString("\nReply with an " + PatchPhrase + " that fixes every error: a JSON array of operations only, ")
	b.WriteString("with no prose and no code fences. Each operation is an object with \"op\" ")
	b.WriteString("(\"add\", \"remove\", \"replace\", \"move\", \"copy\" or \"test\"), \"path\" (a JSON pointer into the value above) ")
	b.WriteString("and \"value\" or \"from\" as the operation needs. ")
	b.WriteString("Touch only the locations with errors: an error's path or what is below it ")
	b.WriteString("(add a missing required property at its path). Do not send the whole value again.")
	return b.String()
}

// patchRequestValue returns the value a patch request shows, and whether
// fb is a patch request.
func patchRequestValue(fb string) ([]byte, bool) {
	rest, ok := strings.CutPrefix(fb, PatchRequestLead+"\n")
	if !ok {
		return nil, false
	}
	const open, close = "\n```json\n", "\n```"
	_, rest, ok = strings.Cut(rest, open)
	if !ok {
		return nil, false
	}
	// The value is compact JSON: no line break before its end.
	value, _, ok := strings.Cut(rest, close)
	if !ok {
		return nil, false
	}
	return []byte(value), true
}

// follow sets the next request's messages after attempt a, whose Feedback
// is set: Feed calls it after each failed attempt and Start for each
// recorded one, so a rebuilt step asks what the step that ran on would.
func (s *Step) follow(a *fixpoint.Attempt) {
	if s.lim.Strategy != fixpoint.StrategyPatch {
		s.messages = nextMessages(s.lim.Strategy, s.base, s.messages, a)
		return
	}
	if value, ok := patchRequestValue(a.Feedback); ok {
		// The task's messages as sent first, then the patch request.
		out := append(make([]fixpoint.Message, 0, len(s.base)+1), s.base...)
		s.messages = append(out, fixpoint.Message{Role: fixpoint.RoleUser, Content: a.Feedback})
		s.patch = &patchState{value: value, errs: append([]fixpoint.ValidationError(nil), a.Errors...)}
		return
	}
	if p := s.patch; p != nil {
		// a answered a patch request: re-ask for the whole value, showing
		// the value it was to patch.
		out := append([]fixpoint.Message(nil), s.base[:len(s.base)-1]...)
		last := s.base[len(s.base)-1]
		s.messages = append(out, fixpoint.Message{Role: fixpoint.RoleUser, Content: repairMessage(last.Content, string(p.value), a.Feedback)})
		s.patch = nil
		return
	}
	s.messages = nextMessages(fixpoint.StrategyRepair, s.base, s.messages, a)
}
