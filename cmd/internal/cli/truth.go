package cli

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/fixpoint-dev/fixpoint/store"
)

// ruleWidth is how many characters of a rule's text a row shows: a rule
// may be 2,048 code points long (the JSON has it whole).
const ruleWidth = 60

// WriteRuleFailures prints the failures of the schema's rules by rule,
// path and severity, the first top of them (0: all); nothing when there
// are none.
func WriteRuleFailures(w io.Writer, rf []store.RuleFailure, top int) {
	if len(rf) == 0 {
		return
	}
	fmt.Fprintln(w, "\nRule failures: the schema's rules that failed, in every attempt and revalidation (FINAL: jobs whose final check still fails it)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RULE\tPATH\tSEVERITY\tFAILURES\tJOBS\tFINAL")
	for _, f := range firstOf(rf, top) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\n", clip(oneLine(f.Rule), ruleWidth), pointerOrRoot(f.Path), f.Severity, f.Failures, f.Jobs, f.FinalJobs)
	}
	tw.Flush()
	more(w, len(rf), top, "rule failure")
}

// WriteGrounding prints how the strings and numbers of the final values
// were found in their source, by field, the least grounded first, the
// first top of them (0: all); nothing when no value was graded.
func WriteGrounding(w io.Writer, fields []store.FieldGrounding, top int) {
	if len(fields) == 0 {
		return
	}
	fmt.Fprintln(w, "\nGrounding by field: the final values' strings and numbers found in their source (NONE%: not found, maybe invented)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FIELD\tLEAVES\tEXACT%\tNORMALIZED%\tFUZZY%\tNONE%")
	for _, g := range firstOf(fields, top) {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", pointerOrRoot(g.Path), g.Leaves,
			Pct(g.Share(g.Exact)), Pct(g.Share(g.Normalized)), Pct(g.Share(g.Fuzzy)), Pct(g.Share(g.None)))
	}
	tw.Flush()
	more(w, len(fields), top, "field")
}

// firstOf is the first top of l (all of it when top is 0).
func firstOf[T any](l []T, top int) []T {
	if top > 0 && len(l) > top {
		return l[:top]
	}
	return l
}

// more says how many rows of n the first top left out.
func more(w io.Writer, n, top int, what string) {
	if top > 0 && n > top {
		fmt.Fprintf(w, "and %s (--format json lists every one)\n", Plural(n-top, "more "+what))
	}
}
