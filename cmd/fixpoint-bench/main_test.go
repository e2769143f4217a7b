package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestRunExitCodes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{args: []string{"--help"}, code: exitOK, want: "Usage: fixpoint-bench [flags]"},
		{args: []string{"--nope"}, code: exitUsage, want: "fixpoint-bench: flag provided but not defined: -nope"},
		{args: []string{"--rounds", "0"}, code: exitUsage, want: "fixpoint-bench: --rounds must be at least 1, got 0"},
	} {
		var out bytes.Buffer
		if code := run(context.Background(), tc.args, &out, &out); code != tc.code || !strings.Contains(out.String(), tc.want) {
			t.Errorf("fixpoint-bench %q: exit %d, want %d, output lacking %q:\n%s", tc.args, code, tc.code, tc.want, out.String())
		}
	}
}
