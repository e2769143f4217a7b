package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// Every command's --help says what it does with an example (a line that
// runs it) and exits 0; worker run's flags are grouped by topic, each in a
// group (a flag added without one lands under "Other flags").
func TestEveryCommandsHelp(t *testing.T) {
	t.Parallel()
	for _, cmd := range commands {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), []string{cmd, "--help"}, strings.NewReader(""), &out, &errOut); code != exitOK {
			t.Errorf("worker %s --help: exit %d, %s", cmd, code, errOut.String())
		}
		example := "\n  worker " + cmd + " "
		if cmd == "run" {
			example = "\n  worker --drain"
		}
		if !strings.Contains(out.String(), example) || !strings.Contains(out.String(), "Flags") && !strings.Contains(out.String(), "Queue") {
			t.Errorf("worker %s --help has no example (%q) or no flags:\n%s", cmd, example, out.String())
		}
	}
	var out bytes.Buffer
	run(context.Background(), []string{"run", "--help"}, strings.NewReader(""), &out, &out)
	help := out.String()
	if strings.Contains(help, "Other flags") {
		t.Errorf("worker run --help has flags in no group:\n%s", help[strings.Index(help, "Other flags"):])
	}
	fs := newRunFlags(&bytes.Buffer{}).fs
	n := 0
	for _, g := range runFlagGroups {
		if !strings.Contains(help, "\n"+g.Title+":\n") {
			t.Errorf("worker run --help lacks the group %q", g.Title)
		}
		for _, name := range g.Flags {
			n++
			if fs.Lookup(name) == nil {
				t.Errorf("group %q names --%s, which worker run does not have", g.Title, name)
			}
			if strings.Count(help, "\n  -"+name+" ") != 1 && strings.Count(help, "\n  -"+name+"\n") != 1 {
				t.Errorf("--%s is not listed once in worker run --help", name)
			}
		}
	}
	if total := strings.Count(help, "\n  -"); total != n {
		t.Errorf("worker run --help lists %d flags, its groups %d", total, n)
	}
}

// A mistyped command is one line naming it and the command meant, exit 2.
func TestUnknownCommand(t *testing.T) {
	t.Parallel()
	for args, want := range map[string]string{
		"chek r.txt": `worker: unknown command "chek": did you mean check? (see worker --help)`,
		"frobnicate": `worker: unknown command "frobnicate": the commands are run, migrate, check, try, demo`,
	} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), strings.Fields(args), strings.NewReader(""), &out, &errOut)
		if code != exitUsage || !strings.Contains(errOut.String(), want) || strings.Count(errOut.String(), "\n") != 1 {
			t.Errorf("worker %s: exit %d, stderr %q; want %d and one line saying %q", args, code, errOut.String(), exitUsage, want)
		}
	}
}
