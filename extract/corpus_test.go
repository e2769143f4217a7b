package extract

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
)

var showFailures = flag.Bool("corpus.failures", false, "log every failing corpus case")

// corpusCase is one line of testdata/corpus/*.jsonl (see its README.md).
type corpusCase struct {
	ID            string          `json:"id"`
	Input         string          `json:"input"`
	Expect        json.RawMessage `json:"expect"`
	ExpectText    *string         `json:"expect_text"`
	ExpectError   bool            `json:"expect_error"`
	Tags          []string        `json:"tags"`
	SchemaNeutral *bool           `json:"schema_neutral"`
	file          string
}

func (c corpusCase) mustFail() bool { return c.ExpectError || c.ExpectText != nil }

func (c corpusCase) group() string {
	for _, t := range c.Tags {
		if g, ok := strings.CutPrefix(t, "group:"); ok {
			return g
		}
	}
	return "none"
}

func (c corpusCase) hasTag(tags ...string) bool {
	return slices.ContainsFunc(c.Tags, func(t string) bool { return slices.Contains(tags, t) })
}

// corpusFloors are the lowest pass rates (percent) the corpus test accepts.
// They are set to what the extractor reaches and only ever raised.
//
// Counting: the dedup key is (input, canonical expect, expect_error,
// expect_text given), with baml restricted to schema_neutral before
// deduplicating. That gives 926 pairs. The README's 919 comes from
// deduplicating first (baml sorts first, so a pair keeps its baml row) and
// then dropping non-neutral baml rows, which also drops 7 pairs that other
// sources (josdejong, kaptinlin, json_repair) assert; we keep those. The
// README's group and tag tables are not deduplicated (1,291 rows: every
// source, neutral baml only); "fence+prose" here is the dedup union of the
// fence, prose, prose-before and prose-after tags (the last two always come
// with prose).
//
// Where a source encodes a convention of its own tool that fixpoint does not
// share, or the peers contradict each other, the pair is listed, by its ids,
// in corpusDisagreements below with the convention fixpoint keeps; the issue's
// targets are checked over the pairs not listed (corpusTargets). The floors
// here are on the raw rates, listed pairs included.
var corpusFloors = map[string]float64{
	"baml-jsonish.jsonl (schema_neutral)": 94.2,
	"josdejong-jsonrepair.jsonl":          90.6,
	"kaptinlin-jsonrepair.jsonl":          89,
	"langchain-json.jsonl":                92.8,
	"mangiucugna-json_repair.jsonl":       80.6,
	"vercel-ai-fixjson.jsonl":             100,
	"dedup: overall":                      87.1,
	"dedup: group llm-typical":            87.5,
	"dedup: fence+prose":                  91.4,
	"dedup: must-fail refused":            100,
}

// corpusTargets are the targets (percent), checked on the dedup pairs
// that are not listed in corpusDisagreements: what fixpoint claims to do.
var corpusTargets = map[string]float64{
	"overall":           85,
	"group llm-typical": 88,
	"fence+prose":       95,
	"must-fail refused": 100,
}

// disagreementCeilings cap how many pairs corpusDisagreements may list per
// measure, so the list cannot grow without this number being raised on
// purpose in the same change.
var disagreementCeilings = map[string]int{
	"overall":           107,
	"group llm-typical": 52,
	"fence+prose":       7,
	"must-fail refused": 0,
}

// Conventions fixpoint keeps where a peer's test asserts otherwise. Each
// names the convention and who holds the other one.
const (
	convBareText       = "bare top-level text: never invent a value from prose (jsonrepair, kaptinlin turn it into a string)"
	convLoneSign       = "a lone \"-\" or \".\" is not a number: never invent 0 (jsonrepair)"
	convRegex          = "a bare /regex/ is prose, not a JSON string (jsonrepair)"
	convInString       = "comments and \"+\" inside a string are string text (issue: \"never inside strings\"); jsonrepair cuts or concatenates"
	convCutMember      = "member cut off before its value: dropped (vercel, langchain), not null (jsonrepair)"
	convEscapes        = "escapes decode as JSON defines them; kaptinlin keeps Windows-path backslashes and drops unknown ones"
	convStrict         = "strict JSON comes back unchanged with zero repairs (strict_test.go); the peer rewrites a valid string"
	convSurround       = "text around a value is normal in a model reply: the value is extracted (jsonrepair refuses)"
	convPyLiteral      = "top-level True/False/None are Python literals (jsonrepair, BAML); json_repair refuses them"
	convCutCloser      = "a string cut off after a closer ends before it (jsonrepair, kaptinlin, json_repair); LangChain keeps it"
	convSeparate       = "several values are separate candidates; json_repair merges them into one or keeps the last"
	convNullMissing    = "a missing member value is null (jsonrepair); json_repair invents \"\""
	convStrayQuote     = "a quote followed by a delimiter closes a string; json_repair and kaptinlin guess other string ends"
	convCutString      = "a string cut off keeps what was written, its half escape dropped; json_repair and kaptinlin trim or split it"
	convUnquoted       = "an unquoted value ends at a comma, newline or closer (json_repair, BAML read prose on)"
	convNoJoin         = "tokens missing their separators stay separate values; the peer joins them into one string"
	convStringValue    = "a string value stays a string even when it holds JSON in a fence (json_repair parses it)"
	convHashComment    = "\"#\" is not a comment marker: after a closed string it is text (json_repair strips it)"
	convSingleQuoted   = "a single-quoted string holding a double quote is that string (json_repair refuses it)"
	convCutNumber      = "a number cut off after its sign is closed as 0 and marked truncated, as jsonrepair does ({\"a\":-}); json_repair drops it"
	convEmptyContainer = "a container opened and then closed by a mismatched closer is kept (json_repair drops or rewraps it)"
)

// corpusDisagreements lists, by the ids of the whole dedup pair (space
// separated, in file order), every failing pair fixpoint deliberately does
// not follow, with the convention it keeps instead. A pair that is merely
// hard is not listed. TestCorpus fails when a listed pair passes or an entry
// does not name exactly one pair, and reports the targets over the pairs not
// listed here.
var corpusDisagreements = map[string]string{
	"josdejong-jsonrepair-34":                           convBareText,
	"josdejong-jsonrepair-35":                           convBareText,
	"josdejong-jsonrepair-36":                           convBareText,
	"josdejong-jsonrepair-37":                           convBareText,
	"josdejong-jsonrepair-38":                           convBareText,
	"josdejong-jsonrepair-56 kaptinlin-jsonrepair-86":   convBareText,
	"josdejong-jsonrepair-57 kaptinlin-jsonrepair-87":   convBareText,
	"josdejong-jsonrepair-66":                           convBareText,
	"josdejong-jsonrepair-139 kaptinlin-jsonrepair-145": convBareText,
	"josdejong-jsonrepair-313 kaptinlin-jsonrepair-82":  convBareText,
	"josdejong-jsonrepair-314 kaptinlin-jsonrepair-83":  convBareText,
	"josdejong-jsonrepair-320 kaptinlin-jsonrepair-305": convBareText,
	"josdejong-jsonrepair-323 kaptinlin-jsonrepair-308": convBareText,
	"josdejong-jsonrepair-330 kaptinlin-jsonrepair-312": convBareText,
	"josdejong-jsonrepair-339":                          convBareText,
	"josdejong-jsonrepair-398 kaptinlin-jsonrepair-378": convBareText,
	"josdejong-jsonrepair-399 kaptinlin-jsonrepair-379": convBareText,
	"kaptinlin-jsonrepair-54":                           convBareText,
	"kaptinlin-jsonrepair-59":                           convBareText,
	"kaptinlin-jsonrepair-178":                          convBareText,
	"kaptinlin-jsonrepair-299":                          convBareText,
	"kaptinlin-jsonrepair-300":                          convBareText,
	"kaptinlin-jsonrepair-301":                          convBareText,
	"kaptinlin-jsonrepair-302":                          convBareText,
	"kaptinlin-jsonrepair-316":                          convBareText,
	"josdejong-jsonrepair-329":                          convLoneSign,
	"josdejong-jsonrepair-346":                          convLoneSign,
	"josdejong-jsonrepair-348 kaptinlin-jsonrepair-324": convRegex,
	"josdejong-jsonrepair-349":                          convRegex,
	"josdejong-jsonrepair-350 kaptinlin-jsonrepair-326": convRegex,
	"kaptinlin-jsonrepair-325":                          convRegex,
	"josdejong-jsonrepair-92 kaptinlin-jsonrepair-100":  convInString,
	"josdejong-jsonrepair-93 kaptinlin-jsonrepair-101":  convInString,
	"josdejong-jsonrepair-94 kaptinlin-jsonrepair-102":  convInString,
	"josdejong-jsonrepair-356 kaptinlin-jsonrepair-333": convInString,
	"josdejong-jsonrepair-357 kaptinlin-jsonrepair-334": convInString,
	"josdejong-jsonrepair-358 kaptinlin-jsonrepair-335": convInString,
	"josdejong-jsonrepair-102 kaptinlin-jsonrepair-110": convCutMember,
	"josdejong-jsonrepair-103 kaptinlin-jsonrepair-111": convCutMember,
	"josdejong-jsonrepair-104 kaptinlin-jsonrepair-112": convCutMember,
	"josdejong-jsonrepair-117 kaptinlin-jsonrepair-123": convCutMember,
	"josdejong-jsonrepair-174 kaptinlin-jsonrepair-182": convCutMember,
	"josdejong-jsonrepair-170 kaptinlin-jsonrepair-176": convEscapes,
	"kaptinlin-jsonrepair-422":                          convEscapes,
	"kaptinlin-jsonrepair-431":                          convEscapes,
	"kaptinlin-jsonrepair-432":                          convEscapes,
	"kaptinlin-jsonrepair-435":                          convEscapes,
	"kaptinlin-jsonrepair-421":                          convStrict,
	"kaptinlin-jsonrepair-429":                          convStrict,
	"kaptinlin-jsonrepair-433":                          convStrict,
	"kaptinlin-jsonrepair-434":                          convStrict,
	"kaptinlin-jsonrepair-451":                          convStrict,
	"kaptinlin-jsonrepair-459":                          convStrict,
	"mangiucugna-json_repair-217":                       convStrict,
	"mangiucugna-json_repair-254":                       convStrict,
	"josdejong-jsonrepair-241 kaptinlin-jsonrepair-240": convSurround,
	"josdejong-jsonrepair-409 kaptinlin-jsonrepair-405": convSurround,
	"josdejong-jsonrepair-411 kaptinlin-jsonrepair-407": convSurround,
	"mangiucugna-json_repair-244":                       convPyLiteral,
	"mangiucugna-json_repair-245":                       convPyLiteral,
	"mangiucugna-json_repair-246":                       convPyLiteral,
	"langchain-json-22":                                 convCutCloser,
	"langchain-json-23":                                 convCutCloser,
	"mangiucugna-json_repair-20":                        convSeparate,
	"mangiucugna-json_repair-54":                        convSeparate,
	"mangiucugna-json_repair-61":                        convSeparate,
	"mangiucugna-json_repair-138":                       convSeparate,
	"mangiucugna-json_repair-139":                       convSeparate,
	"mangiucugna-json_repair-140":                       convSeparate,
	"mangiucugna-json_repair-141":                       convSeparate,
	"mangiucugna-json_repair-159":                       convSeparate,
	"mangiucugna-json_repair-31":                        convNullMissing,
	"mangiucugna-json_repair-143":                       convNullMissing,
	"mangiucugna-json_repair-154":                       convNullMissing,
	"mangiucugna-json_repair-267":                       convNullMissing,
	"mangiucugna-json_repair-35":                        convStrayQuote,
	"mangiucugna-json_repair-56":                        convStrayQuote,
	"mangiucugna-json_repair-72":                        convStrayQuote,
	"mangiucugna-json_repair-73":                        convStrayQuote,
	"mangiucugna-json_repair-74":                        convStrayQuote,
	"mangiucugna-json_repair-115":                       convStrayQuote,
	"mangiucugna-json_repair-122":                       convStrayQuote,
	"mangiucugna-json_repair-142":                       convStrayQuote,
	"mangiucugna-json_repair-194":                       convSingleQuoted,
	"mangiucugna-json_repair-100":                       convCutNumber,
	"mangiucugna-json_repair-255":                       convStrayQuote,
	"mangiucugna-json_repair-256":                       convStrayQuote,
	"kaptinlin-jsonrepair-80":                           convStrayQuote,
	"kaptinlin-jsonrepair-81":                           convStrayQuote,
	"kaptinlin-jsonrepair-454":                          convStrayQuote,
	"mangiucugna-json_repair-33":                        convCutString,
	"mangiucugna-json_repair-34":                        convCutString,
	"mangiucugna-json_repair-40":                        convCutString,
	"kaptinlin-jsonrepair-73":                           convCutString,
	"baml-jsonish-63":                                   convUnquoted,
	"baml-jsonish-113":                                  convUnquoted,
	"mangiucugna-json_repair-125":                       convUnquoted,
	"mangiucugna-json_repair-126":                       convUnquoted,
	"mangiucugna-json_repair-131":                       convUnquoted,
	"mangiucugna-json_repair-132":                       convUnquoted,
	"josdejong-jsonrepair-335 kaptinlin-jsonrepair-318": convNoJoin,
	"mangiucugna-json_repair-96":                        convNoJoin,
	"mangiucugna-json_repair-215":                       convStringValue,
	"mangiucugna-json_repair-78":                        convHashComment,
	"mangiucugna-json_repair-39":                        convEmptyContainer,
	"mangiucugna-json_repair-152":                       convEmptyContainer,
	"mangiucugna-json_repair-146":                       convEmptyContainer,
}

func loadCorpus(t *testing.T) []corpusCase {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "corpus", "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("glob corpus: %v (%d files)", err, len(files))
	}
	var cases []corpusCase
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatalf("open %s: %v", name, err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
		for sc.Scan() {
			var c corpusCase
			if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
				t.Fatalf("decode %s: %v", name, err)
			}
			c.file = filepath.Base(name)
			cases = append(cases, c)
		}
		if err := sc.Err(); err != nil {
			t.Fatalf("read %s: %v", name, err)
		}
		f.Close()
	}
	return cases
}

// scoreCase applies the corpus README's scoring to Extract: the case passes
// when the first candidate equals expect (object key order ignored, numbers as
// float64). Where the source expects an array and the reply holds several
// values, the list of all candidates is also compared to it, because fixpoint
// returns several values as several candidates. Must-fail cases pass when
// Extract finds nothing.
func scoreCase(c corpusCase) (bool, string) {
	cands, err := Extract(c.Input)
	if c.mustFail() {
		if err != nil {
			return true, ""
		}
		return false, "got " + string(cands[0].JSON)
	}
	if err != nil {
		return false, err.Error()
	}
	var want any
	if err := json.Unmarshal(c.Expect, &want); err != nil {
		return false, "bad expect: " + err.Error()
	}
	first := asFloat(cands[0].JSON)
	if reflect.DeepEqual(first, want) {
		return true, ""
	}
	if arr, ok := want.([]any); ok && len(cands) > 1 && len(arr) == len(cands) {
		all := make([]any, len(cands))
		for i, cd := range cands {
			all[i] = asFloat(cd.JSON)
		}
		if reflect.DeepEqual(all, arr) {
			return true, ""
		}
	}
	var got []string
	for _, cd := range cands {
		got = append(got, string(cd.JSON))
	}
	return false, "got " + strings.Join(got, " | ")
}

func asFloat(b []byte) any {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	return v
}

type tally struct{ pass, n int }

func (t tally) pct() float64 {
	if t.n == 0 {
		return 100
	}
	return 100 * float64(t.pass) / float64(t.n)
}

func (t tally) String() string { return fmt.Sprintf("%4d/%-4d %5.1f%%", t.pass, t.n, t.pct()) }

// corpusPair is one deduplicated (input, expectation) pair and the ids of
// every counted row that asserts it.
type corpusPair struct {
	ids []string
	c   corpusCase
	ok  bool
	why string
}

// measures names the dedup aggregates a pair counts under.
func (p *corpusPair) measures() []string {
	m := []string{"overall"}
	if p.c.group() == "llm-typical" {
		m = append(m, "group llm-typical")
	}
	if p.c.hasTag("fence", "prose", "prose-before", "prose-after") {
		m = append(m, "fence+prose")
	}
	if p.c.group() == "must-fail" {
		m = append(m, "must-fail refused")
	}
	return m
}

func TestCorpus(t *testing.T) {
	t.Parallel()
	cases := loadCorpus(t)
	bySource := map[string]*tally{}
	byTag := map[string]*tally{}
	byGroup := map[string]*tally{}
	dedup := map[string]*tally{}
	add := func(m map[string]*tally, k string, ok bool) {
		if m[k] == nil {
			m[k] = &tally{}
		}
		m[k].n++
		if ok {
			m[k].pass++
		}
	}
	var failures []string
	pairs := map[string]*corpusPair{}
	var order []*corpusPair
	for _, c := range cases {
		ok, why := scoreCase(c)
		neutral := c.SchemaNeutral == nil || *c.SchemaNeutral
		src := c.file
		if c.SchemaNeutral != nil {
			add(bySource, src+" (all)", ok)
			if !neutral {
				continue
			}
			src += " (schema_neutral)"
		}
		add(bySource, src, ok)
		if !ok {
			failures = append(failures, fmt.Sprintf("%s: %q: %s", c.ID, clip(c.Input, 120), clip(why, 160)))
		}
		canon, _ := json.Marshal(asFloat(c.Expect))
		key := c.Input + "\x00" + string(canon) + fmt.Sprint(c.ExpectError, c.ExpectText != nil)
		if p := pairs[key]; p != nil {
			p.ids = append(p.ids, c.ID)
			continue
		}
		p := &corpusPair{ids: []string{c.ID}, c: c, ok: ok, why: why}
		pairs[key] = p
		order = append(order, p)
		add(byGroup, c.group(), ok)
		for _, tg := range c.Tags {
			if !strings.HasPrefix(tg, "group:") {
				add(byTag, tg, ok)
			}
		}
	}

	// Match the disagreement list to the pairs: every entry must name all
	// ids of one failing pair, and a listed pair that passes fails the test,
	// so the list cannot go stale.
	listed := map[string]bool{}
	byIDs := map[string]*corpusPair{}
	for _, p := range order {
		byIDs[strings.Join(p.ids, " ")] = p
	}
	listedPer := map[string]int{}
	reasonPer := map[string]map[string]int{}
	for ids, why := range corpusDisagreements {
		p, ok := byIDs[ids]
		if !ok {
			t.Errorf("disagreement %q: not the full id list of one dedup pair", ids)
			continue
		}
		if why == "" {
			t.Errorf("disagreement %q: no convention named", ids)
		}
		if p.ok {
			t.Errorf("disagreement %q now passes: remove it from corpusDisagreements and raise the floors", ids)
		}
		listed[ids] = true
		for _, m := range p.measures() {
			listedPer[m]++
			if reasonPer[m] == nil {
				reasonPer[m] = map[string]int{}
			}
			reasonPer[m][why]++
		}
	}
	for _, p := range order {
		for _, m := range p.measures() {
			add(dedup, "dedup: "+m, p.ok)
			if !listed[strings.Join(p.ids, " ")] {
				add(dedup, "dedup excl. disagreements: "+m, p.ok)
			}
		}
	}

	logTable(t, "source", bySource)
	logTable(t, "dedup aggregate (raw, and over the pairs not listed in corpusDisagreements)", dedup)
	logTable(t, "dedup group", byGroup)
	logTable(t, "dedup tag", byTag)
	var b strings.Builder
	b.WriteString("disagreements listed (pairs, by measure):\n")
	for _, m := range slices.Sorted(maps.Keys(listedPer)) {
		fmt.Fprintf(&b, "  %-20s %3d (ceiling %d)\n", m, listedPer[m], disagreementCeilings[m])
		reasons := slices.Sorted(maps.Keys(reasonPer[m]))
		slices.SortStableFunc(reasons, func(x, y string) int { return reasonPer[m][y] - reasonPer[m][x] })
		for _, r := range reasons {
			fmt.Fprintf(&b, "      %3d  %s\n", reasonPer[m][r], r)
		}
	}
	t.Log(b.String())
	if *showFailures {
		for _, f := range failures {
			t.Log(f)
		}
		for _, p := range order {
			if !p.ok && !listed[strings.Join(p.ids, " ")] {
				t.Logf("unlisted failing pair %s: %q: %s", strings.Join(p.ids, " "), clip(p.c.Input, 120), clip(p.why, 160))
			}
		}
	}
	for m, ceiling := range disagreementCeilings {
		if listedPer[m] > ceiling {
			t.Errorf("%s: %d pairs listed as disagreements, above the ceiling %d: a new disagreement needs its ceiling raised on purpose", m, listedPer[m], ceiling)
		}
	}
	for name, floor := range corpusFloors {
		got, ok := bySource[name]
		if !ok {
			got, ok = dedup[name]
		}
		if !ok {
			t.Errorf("floor %q: no such measure", name)
			continue
		}
		if got.pct() < floor {
			t.Errorf("%s: pass rate %.1f%% is below the floor %.1f%%", name, got.pct(), floor)
		}
	}
	for m, target := range corpusTargets {
		got := dedup["dedup excl. disagreements: "+m]
		if got == nil {
			t.Errorf("target %q: no such measure", m)
			continue
		}
		if got.pct() < target {
			t.Errorf("%s, excluding listed disagreements: pass rate %.1f%% is below the issue's target %.0f%%", m, got.pct(), target)
		}
	}
}

func logTable(t *testing.T, title string, m map[string]*tally) {
	t.Helper()
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "%s:\n", title)
	for _, k := range keys {
		fmt.Fprintf(&b, "  %-40s %s\n", k, m[k])
	}
	t.Log(b.String())
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// TestCorpusValuesAgreeWithEncodingJSON: on every corpus reply, each
// candidate's Value is what encoding/json decodes from its JSON (decode
// uses segmentio/encoding/json for speed; the standard library is the
// reference).
func TestCorpusValuesAgreeWithEncodingJSON(t *testing.T) {
	t.Parallel()
	n := 0
	for _, c := range loadCorpus(t) {
		cands, _ := Extract(c.Input)
		for i, cd := range cands {
			n++
			if want, ok := stdDecode(cd.JSON); !ok || !reflect.DeepEqual(cd.Value, want) {
				t.Errorf("%s: candidate %d Value %#v, encoding/json decodes %q as %#v (ok=%v)", c.file, i, cd.Value, cd.JSON, want, ok)
			}
		}
	}
	if n < 1000 {
		t.Fatalf("only %d candidates checked; the corpus did not load", n)
	}
}
