// Package cliflags holds the flag conventions the fixpoint commands share:
// a --help that prints the usage, the flags and the environment variables
// a command reads, and usage errors, which a command turns into exit code 2.
package cliflags

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/fixpoint-dev/fixpoint"
)

// UsageError marks an error caused by how the command was called.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// Usagef returns a UsageError with a formatted message.
func Usagef(format string, args ...any) error {
	return UsageError{fmt.Errorf(format, args...)}
}

// NewFlagSet returns a flag set whose --help prints usage, the flags and,
// when envHelp is not empty, the environment variables the command reads.
func NewFlagSet(name, usage, envHelp string, stdout io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() {
		fmt.Fprintln(stdout, strings.TrimSpace(usage))
		fmt.Fprintln(stdout, "\nFlags:")
		fs.PrintDefaults()
		if envHelp != "" {
			fmt.Fprintln(stdout, "\nEnvironment:")
			fmt.Fprintln(stdout, strings.TrimRight(envHelp, "\n"))
		}
	}
	return fs
}

// Parse parses args into fs. It returns flag.ErrHelp for --help, after
// printing fs.Usage, and a UsageError for anything else fs refuses, printing
// nothing: the command reports the error on stderr, and a typo in a command
// whose stdout is redirected into a file must not fill it with the help.
// The error points at the help of the command fs is named after ("report
// export"), where the flags it does take are listed.
func Parse(fs *flag.FlagSet, args []string) error {
	usage, out := fs.Usage, fs.Output()
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.Usage = usage
	fs.SetOutput(out)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		fs.Usage()
		return err
	default:
		if near := nearFlag(fs, err); near != "" {
			return UsageError{fmt.Errorf("%w: did you mean --%s? (see %s --help)", err, near, fs.Name())}
		}
		return UsageError{fmt.Errorf("%w (see %s --help)", err, fs.Name())}
	}
}

// undefinedFlag is how the flag package says a flag is not one of the set.
const undefinedFlag = "flag provided but not defined: -"

// nearFlag returns the flag of fs that the undefined flag err names is a
// near miss of (--max-atempts for --max-attempts), or "".
func nearFlag(fs *flag.FlagSet, err error) string {
	name, ok := strings.CutPrefix(err.Error(), undefinedFlag)
	if !ok {
		return ""
	}
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	return Near(name, names...)
}

// ParseArgs is Parse for a command whose flags may come before, between
// or after its arguments (Go's flag package stops at the first argument,
// and would drop every flag after it without a word): it returns the
// arguments in order. After "--" everything is an argument.
func ParseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for rest := args; ; {
		if err := Parse(fs, rest); err != nil {
			return nil, err
		}
		rest = fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if isTerminated(args, rest) {
			return append(pos, rest...), nil
		}
		pos, rest = append(pos, rest[0]), rest[1:]
	}
}

// isTerminated reports whether the flag package stopped at rest because of
// a "--" just before it.
func isTerminated(args, rest []string) bool {
	i := len(args) - len(rest) - 1
	return i >= 0 && args[i] == "--"
}

// NoArgs is ParseArgs for a command that takes no arguments: a stray word
// is a usage error naming it, not the silent end of the flags.
func NoArgs(fs *flag.FlagSet, args []string) error {
	pos, err := ParseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return Usagef("unexpected argument %q: %s takes flags only (see --help)", pos[0], fs.Name())
	}
	return nil
}

// SettingUsage turns an error of a config's Validate into a usage error,
// naming the flag behind its setting when flags (setting name to flag)
// has it: the value is reported as the flag typed.
func SettingUsage(err error, flags map[string]string) error {
	var se *fixpoint.SettingError
	if errors.As(err, &se) {
		if f, ok := flags[se.Setting]; ok {
			return Usagef("%s %v %s", f, se.Value, se.Problem)
		}
	}
	return UsageError{Err: err}
}

// CommandAfterFlags returns the first of commands that args hold after a
// leading flag ("" when args do not start with a flag or hold none): the
// mark of flags put before the command (enqueue --progress=false cancel),
// which a command line reads as the default command's.
func CommandAfterFlags(args []string, commands ...string) string {
	if len(args) == 0 || !strings.HasPrefix(args[0], "-") {
		return ""
	}
	for _, a := range args[1:] {
		if a == "--" {
			return ""
		}
		if slices.Contains(commands, a) {
			return a
		}
	}
	return ""
}

// Near returns the one of commands that word is a near miss of (a letter
// off, missing, extra, or two letters swapped), or "".
func Near(word string, commands ...string) string {
	for _, c := range commands {
		if word != c && word != "" && editDistance(word, c) <= 1+len(c)/6 {
			return c
		}
	}
	return ""
}

// UnknownCommand is the usage error of a word that is not one of
// commands, suggesting the one it is a near miss of.
func UnknownCommand(prog, word string, commands ...string) error {
	if near := Near(word, commands...); near != "" {
		return Usagef("unknown command %q: did you mean %s? (see %s --help)", word, near, prog)
	}
	return Usagef("unknown command %q: the commands are %s (see %s --help)", word, strings.Join(commands, ", "), prog)
}

// editDistance is the edit distance of two short words: letters inserted,
// deleted, changed, or two neighbours swapped (optimal string alignment).
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// FlagGroup is a titled group of flags in a command's help.
type FlagGroup struct {
	Title string
	Flags []string
}

// PrintGroups prints fs's flags group by group, in the format of
// flag.PrintDefaults; flags no group names come last under "Other flags".
// A command with many flags reads better by topic than in one sorted list.
func PrintGroups(w io.Writer, fs *flag.FlagSet, groups []FlagGroup) {
	grouped := map[string]bool{}
	printGroup := func(title string, names []string) {
		sub := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
		sub.SetOutput(w)
		for _, name := range names {
			if f := fs.Lookup(name); f != nil {
				sub.Var(f.Value, f.Name, f.Usage)
				sub.Lookup(name).DefValue = f.DefValue // not a value parsed before --help
				grouped[name] = true
			}
		}
		n := 0
		sub.VisitAll(func(*flag.Flag) { n++ })
		if n == 0 {
			return
		}
		fmt.Fprintf(w, "\n%s:\n", title)
		sub.PrintDefaults()
	}
	for _, g := range groups {
		printGroup(g.Title, g.Flags)
	}
	var rest []string
	fs.VisitAll(func(f *flag.Flag) {
		if !grouped[f.Name] {
			rest = append(rest, f.Name)
		}
	})
	printGroup("Other flags", rest)
}
