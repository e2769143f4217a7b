package main

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
)

// settingFlags are the flags that set a batch's settings: --resume takes
// them from the ledger instead.
var settingFlags = []string{"schema", "template", "system-file", "format", "mode", "strategy", "feedback", "temperature",
	"id-field", "provider", "model", "max-tokens", "max-attempts", "token-budget", "retry-budget", "max-bad-rows", "max-prompt-bytes",
	"max-cost-usd", "max-total-tokens", "delivery", "deadline", "prompt-cache", "coerce", "evidence", "evidence-source",
	"document-field", "document-file-field", "max-document-bytes", "chunk-tokens", "chunk-overlap", "list-passes", "strict", "max-validation-attempts"}

// checkResume checks the flags and arguments of enqueue --resume, which
// finishes a run cut short after every row was recorded, with the batch's
// recorded settings: it takes no setting and reads no dataset.
func checkResume(fs *flag.FlagSet, pos []string, dryRun bool) error {
	var given []string
	fs.Visit(func(f *flag.Flag) {
		if slices.Contains(settingFlags, f.Name) {
			given = append(given, "--"+f.Name)
		}
	})
	if len(given) > 0 {
		return usageError{Err: fmt.Errorf("--resume takes every setting from the batch as recorded; drop %s (to run jobs again with other settings, use enqueue requeue)", strings.Join(given, ", "))}
	}
	if len(pos) != 0 {
		return usageError{Err: fmt.Errorf("--resume reads no dataset, got %d arguments", len(pos))}
	}
	if dryRun {
		return usageError{Err: errors.New("--dry-run and --resume do not go together")}
	}
	return nil
}
