package fixpoint_test

import (
	"testing"

	"github.com/fixpoint-dev/fixpoint"
)

func TestUsageImplausible(t *testing.T) {
	t.Parallel()
	for u, bad := range map[fixpoint.Usage]bool{
		{}: false,
		{InputTokens: fixpoint.MaxCallTokens, OutputTokens: fixpoint.MaxCallTokens}: false,
		{InputTokens: 100, CachedInputTokens: 60, CacheWriteTokens: 40}:             false,
		{InputTokens: fixpoint.MaxCallTokens + 1}:                                   true,
		{OutputTokens: -1}:                                                                true,
		{InputTokens: 100, CachedInputTokens: -1}:                                         true,
		{InputTokens: 100, CachedInputTokens: 60, CacheWriteTokens: 41}:                   true,
		{InputTokens: 1, OutputTokens: 1, CacheWriteTokens: fixpoint.MaxCallTokens * 100}: true,
	} {
		if got := u.Implausible() != ""; got != bad {
			t.Errorf("%+v: implausible %v (%q), want %v", u, got, u.Implausible(), bad)
		}
	}
}
