package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint/llm"
)

// Every row of the provider table reaches report serve: its help names
// the row's variables, and the Try playground offers it, asking for a key
// where the row needs one.
func TestEveryProviderReachesThePlayground(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	run(context.Background(), []string{"serve", "--help"}, &out, &out)
	choices := newPlayground(nil).Choices().Providers
	for _, p := range llm.Providers() {
		for _, v := range []string{p.BaseURLEnv, p.KeyEnv} {
			if !strings.Contains(out.String(), v) {
				t.Errorf("report serve --help lacks %s's %q", p.Name, v)
			}
		}
		found := false
		for _, c := range choices {
			if c.Name == p.Name {
				found = true
				if c.NeedsKey != p.KeyRequired || c.DefaultModel != p.DefaultModel {
					t.Errorf("playground offers %s needing a key %v with model %q; the row says %v, %q", p.Name, c.NeedsKey, c.DefaultModel, p.KeyRequired, p.DefaultModel)
				}
			}
		}
		if !found {
			t.Errorf("the playground does not offer %s", p.Name)
		}
	}
}
