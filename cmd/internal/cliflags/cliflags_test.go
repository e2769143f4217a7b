package cliflags

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint/pipeline"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/wave"
)

func TestHelpPrintsUsageFlagsAndEnvironment(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	fs := NewFlagSet("cmd", "\nUsage: cmd [flags]\n", "  SOME_VAR  what it does\n", &out)
	fs.Int("rows", 3, "rows to read")
	if err := Parse(fs, []string{"--help"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("Parse(--help) = %v, want flag.ErrHelp", err)
	}
	got := out.String()
	for _, want := range []string{"Usage: cmd [flags]\n\nFlags:\n", "-rows int", "rows to read (default 3)", "\nEnvironment:\n  SOME_VAR  what it does\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("help lacks %q:\n%s", want, got)
		}
	}
	if strings.HasPrefix(got, "\n") {
		t.Errorf("help starts with a blank line:\n%s", got)
	}
}

func TestHelpWithoutEnvironment(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	fs := NewFlagSet("cmd", "Usage: cmd", "", &out)
	_ = Parse(fs, []string{"-h"})
	if strings.Contains(out.String(), "Environment") {
		t.Errorf("help names an environment it does not have:\n%s", out.String())
	}
}

func TestBadFlagsAreUsageErrors(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--nope"}, {"--rows", "many"}} {
		var out bytes.Buffer
		fs := NewFlagSet("cmd", "Usage: cmd", "", &out)
		fs.Int("rows", 3, "rows")
		err := Parse(fs, args)
		var uerr UsageError
		if !errors.As(err, &uerr) || !strings.Contains(err.Error(), "(see cmd --help)") {
			t.Errorf("Parse(%q) = %v, want a UsageError pointing at --help", args, err)
		}
		// The command prints the error on stderr; stdout, perhaps a file
		// the output was redirected to, gets nothing.
		if out.Len() != 0 {
			t.Errorf("Parse(%q) wrote %q to stdout", args, out.String())
		}
	}
	var uerr UsageError
	if err := Usagef("--rows must be at least %d", 1); !errors.As(err, &uerr) || err.Error() != "--rows must be at least 1" {
		t.Errorf("Usagef = %v", err)
	}
	fs := NewFlagSet("cmd", "Usage: cmd", "", &bytes.Buffer{})
	if err := Parse(fs, nil); err != nil {
		t.Errorf("Parse(nil) = %v", err)
	}
}

// ParseArgs reads flags wherever they are among the arguments, and after
// "--" takes everything as an argument; NoArgs refuses a stray word.
func TestParseArgs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		pos  string
		n    int
	}{
		{[]string{"a", "--n", "3", "b"}, "[a b]", 3},
		{[]string{"--n", "1", "a"}, "[a]", 1},
		{[]string{"a", "--", "--n", "5"}, "[a --n 5]", 0},
		{[]string{"--", "--"}, "[--]", 0},
		{nil, "[]", 0},
	} {
		fs := NewFlagSet("x", "usage", "", io.Discard)
		n := fs.Int("n", 0, "")
		pos, err := ParseArgs(fs, tc.args)
		if err != nil || fmt.Sprint(pos) != tc.pos || *n != tc.n {
			t.Errorf("ParseArgs(%q) = %q, n=%d, %v; want %s, n=%d", tc.args, pos, *n, err, tc.pos, tc.n)
		}
	}
	fs := NewFlagSet("x", "usage", "", io.Discard)
	fs.Int("n", 0, "")
	var ue UsageError
	if err := NoArgs(fs, []string{"--n", "1", "stray", "--n", "2"}); !errors.As(err, &ue) || !strings.Contains(err.Error(), `"stray"`) {
		t.Errorf("NoArgs with a stray word: %v; want a usage error naming it", err)
	}
}

func TestCommandAfterFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--progress=false", "cancel", "--batch", "x"}, "cancel"},
		{[]string{"--database-url", "postgres://h/db", "summary"}, "summary"},
		{[]string{"cancel", "--batch", "x"}, ""},       // the command is first
		{[]string{"--batch", "x", "data.csv"}, ""},     // no command at all
		{[]string{"--batch", "x", "--", "cancel"}, ""}, // a file named cancel
		{nil, ""},
	} {
		if got := CommandAfterFlags(tc.args, "requeue", "cancel", "cap", "summary"); got != tc.want {
			t.Errorf("CommandAfterFlags(%q) = %q, want %q", tc.args, got, tc.want)
		}
	}
}

// A near miss of a command is suggested; a word far from every command is
// answered with the list.
func TestUnknownCommand(t *testing.T) {
	t.Parallel()
	for word, want := range map[string]string{
		"requeu":     "did you mean requeue?",
		"cpa":        "did you mean cap?",
		"canecl":     "did you mean cancel?",
		"frobnicate": "the commands are requeue, cancel, cap (see enqueue --help)",
	} {
		err := UnknownCommand("enqueue", word, "requeue", "cancel", "cap")
		var ue UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), `"`+word+`"`) {
			t.Errorf("UnknownCommand(%q) = %v; want a usage error naming it and saying %q", word, err, want)
		}
	}
	if got := Near("cap", "requeue", "cancel", "cap"); got != "" {
		t.Errorf("Near(cap) = %q: a command is not a near miss of itself", got)
	}
}

// PrintGroups lists every flag once, under its group's title, with the
// default it was declared with; flags no group names come last.
func TestPrintGroups(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	fs := NewFlagSet("cmd", "usage", "", &out)
	fs.Int("rows", 3, "rows to read")
	fs.String("url", "x", "where")
	fs.Bool("quiet", false, "say less")
	if err := fs.Parse([]string{"--rows", "9"}); err != nil {
		t.Fatal(err)
	}
	PrintGroups(&out, fs, []FlagGroup{{"Input", []string{"rows", "nosuch"}}, {"Empty", nil}, {"Output", []string{"url"}}})
	got := out.String()
	in, outp, other := strings.Index(got, "\nInput:\n"), strings.Index(got, "\nOutput:\n"), strings.Index(got, "\nOther flags:\n")
	if in < 0 || outp < in || other < outp || strings.Contains(got, "Empty") {
		t.Fatalf("groups out of order or an empty one printed:\n%s", got)
	}
	if !strings.Contains(got[in:outp], "-rows int") || !strings.Contains(got[in:outp], "(default 3)") ||
		!strings.Contains(got[outp:other], "-url string") || !strings.Contains(got[other:], "-quiet") {
		t.Errorf("flags in the wrong groups, or the parsed value shown as the default:\n%s", got)
	}
	if strings.Count(got, "-rows") != 1 {
		t.Errorf("a flag listed twice:\n%s", got)
	}
}

// An undefined flag a letter off one of the set's is answered with it.
func TestNearFlag(t *testing.T) {
	t.Parallel()
	for args, want := range map[string]string{
		"--concurency 3": "flag provided but not defined: -concurency: did you mean --concurrency? (see cmd run --help)",
		"--rows 3":       "flag provided but not defined: -rows (see cmd run --help)",
	} {
		fs := NewFlagSet("cmd run", "usage", "", io.Discard)
		fs.Int("concurrency", 1, "")
		fs.Int("max-attempts", 1, "")
		if err := Parse(fs, strings.Fields(args)); err == nil || err.Error() != want {
			t.Errorf("Parse(%s) = %v, want %q", args, err, want)
		}
	}
}

// A setting that cannot work becomes a usage error naming the command's
// flag for it, whichever configuration refused it: the queue's, the wave
// driver's or the worker's (which names the others' with their prefix).
func TestSettingUsageNamesTheFlag(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err     error
		flags   map[string]string
		want    string
		setting string
	}{
		{queue.Config{Stream: "a/b"}.WithDefaults().Validate(), map[string]string{"Stream": "--stream"}, `--stream "a/b" is not a stream name`, "queue"},
		{wave.Config{Lease: time.Millisecond}.WithDefaults().Validate(), map[string]string{"Lease": "--wave-lease"}, "--wave-lease 1ms must be at least 1s", "wave"},
		{pipeline.WorkerConfig{Wave: wave.Config{Lease: time.Millisecond}}.WithDefaults().Validate(), map[string]string{"Wave.Lease": "--wave-lease"}, "--wave-lease 1ms must be at least 1s", "worker"},
		{pipeline.WorkerConfig{Queue: queue.Config{Stream: "a/b"}}.WithDefaults().Validate(), map[string]string{"Queue.Stream": "--stream"}, `--stream "a/b" is not a stream name`, "worker"},
	} {
		err := SettingUsage(c.err, c.flags)
		var ue UsageError
		if !errors.As(err, &ue) || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("the %s's %v: %v; want a usage error starting %q", c.setting, c.err, err, c.want)
		}
		if !strings.HasPrefix(c.err.Error(), c.setting+" setting ") {
			t.Errorf("%q does not say it is a %s setting", c.err, c.setting)
		}
	}
}
