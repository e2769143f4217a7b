package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// report purge: what report summary, report failures and report job --format
// json print of the batches is the same after it but for the purge's mark,
// a dry run deletes nothing, and a purged job says so.
func TestReportPurge(t *testing.T) {
	t.Parallel()
	dsn := seed(t)
	say := func(args ...string) (string, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(context.Background(), append(args, "--database-url", dsn), &out, &errOut); code != 0 {
			t.Fatalf("report %s: exit %d, stderr %q", strings.Join(args, " "), code, errOut.String())
		}
		return out.String(), errOut.String()
	}
	summary, _ := say("summary")
	failures, _ := say("failures", "b1")
	job, _ := say("job", "b1:1")

	dry, _ := say("purge", "--older-than", "1ms", "--dry-run")
	if !strings.HasPrefix(dry, "would purge the attempts of 2 jobs") {
		t.Errorf("dry run: %q; want it to count b1's two finished jobs", dry)
	}
	if again, _ := say("job", "b1:1"); again != job {
		t.Errorf("a dry run changed report job:\n%s\nbefore:\n%s", again, job)
	}
	done, _ := say("purge", "--older-than", "1ms", "--batch", "b1")
	if !strings.HasPrefix(done, "purged the attempts of 2 jobs") || !strings.Contains(done, "3 attempts, 2 calls kept apart") {
		t.Errorf("purge: %q; want 2 jobs, 3 attempts and 2 calls kept apart", done)
	}
	if after, _ := say("summary"); after != summary {
		t.Errorf("report summary changed with the purge:\n%s\nbefore:\n%s", after, summary)
	}
	if after, _ := say("failures", "b1"); after != failures {
		t.Errorf("report failures changed with the purge:\n%s\nbefore:\n%s", after, failures)
	}
	after, _ := say("job", "b1:1")
	if !strings.Contains(after, "attempts purged") || !strings.Contains(after, "(2 attempts, 1 calls kept apart") {
		t.Errorf("report job of a purged job:\n%s\nwant it to say its 2 attempts and 1 call kept apart were purged", after)
	}
	if js, _ := say("job", "b1:1", "--format", "json"); !strings.Contains(js, `"purged": {`) || !strings.Contains(js, `"attempt_list": []`) {
		t.Errorf("report job --format json of a purged job: %s; want purged set and no attempts", js)
	}
}

// report purge's flags are checked before the ledger is reached: a missing
// or bad --older-than is a usage error (exit 2) in one line.
func TestReportPurgeUsage(t *testing.T) {
	t.Parallel()
	for args, want := range map[string]string{
		"purge":                        "--older-than is required",
		"purge --older-than 0d":        `--older-than "0d": want a positive whole number of days`,
		"purge --older-than 1.5d":      `--older-than "1.5d": want a positive whole number of days`,
		"purge --older-than 30":        `--older-than "30": want a positive Go duration`,
		"purge --older-than -1h":       `--older-than "-1h": want a positive Go duration`,
		"purge --older-than 30dd":      `--older-than "30dd"`,
		"purge b1 --older-than 30d":    `purge takes no argument, got "b1"`,
		"purge --older-then 30d":       "flag provided but not defined: -older-then",
		"purge --older-than 30d --dry": "flag provided but not defined: -dry",
	} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), append(strings.Fields(args), "--database-url", "postgres://nobody@127.0.0.1:1/none"), &out, &errOut)
		msg := errOut.String()
		if code != 2 || !strings.Contains(msg, want) || strings.Count(msg, "\n") != 1 {
			t.Errorf("report %s: exit %d, stderr %q; want 2 and one line saying %q", args, code, msg, want)
		}
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"purge", "--help"}, &out, &errOut); code != 0 ||
		!strings.Contains(out.String(), "report purge --older-than 90d") || !strings.Contains(out.String(), "Exit status:") {
		t.Errorf("purge --help: exit %d:\n%s", code, out.String())
	}
}
