package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/fixpoint-dev/fixpoint"
)

// chunkTokensMin is the smallest --chunk-tokens taken: every chunk call
// carries the prompt, the schema and the system prompt, which a chunk of a
// sentence or two would cost many times over.
const chunkTokensMin = 50

// documentStrategyFlags are the flags only a document strategy reads.
var documentStrategyFlags = []string{"chunk-tokens", "chunk-overlap", "list-passes", "strict", "max-validation-attempts"}

// strategyHelp is --strategy's help text.
func strategyHelp() string {
	return "repair strategy: " + strings.Join(fixpoint.StrategyNames(), ", ") +
		" (patch: an RFC 6902 JSON Patch of the failing locations, mode prompt only; parallel, sequential and agent run over each job's document in several calls, mode prompt only, see docs/documents.md)"
}

// registerDocumentFlags adds the document strategies' flags to fs.
func registerDocumentFlags(fs *flag.FlagSet, lim *fixpoint.Limits) {
	fs.IntVar(&lim.ChunkTokens, "chunk-tokens", 0, fmt.Sprintf("document strategies: chunk size in estimated tokens, %d or more (0 = %d)", chunkTokensMin, fixpoint.ChunkTokensDefault))
	fs.IntVar(&lim.ChunkOverlap, "chunk-overlap", 0, fmt.Sprintf("document strategies: tokens each chunk repeats of the previous one, less than --chunk-tokens (default %d with the default chunk size, else 0)", fixpoint.ChunkOverlapDefault))
	fs.IntVar(&lim.ListPasses, "list-passes", fixpoint.ListPassesDefault, "strategies parallel and sequential: more calls a chunk may get over its rest, from the last item read, while its value's list looks cut (0: none; see docs/documents.md)")
	fs.BoolVar(&lim.Strict, "strict", false, "document strategies: check each chunk's value against the full schema, required properties and all (default: a property missing from a chunk is no error)")
	fs.IntVar(&lim.MaxValidationAttempts, "max-validation-attempts", 0, fmt.Sprintf("strategy agent: how often finish may be refused for a value the schema does not take, 1 to %d (0 = %d)", fixpoint.MaxAttemptsMax, fixpoint.ValidationAttemptsDefault))
	fs.StringVar(&lim.MergeModel, "merge-model", "", "strategy parallel: a model of the same provider that merges the chunks' values in one call when two or more chunks gave one (default: merged by rule, no call; see docs/documents.md)")
}

// checkDocumentFlags checks the document strategies' flags against
// strategy: their ranges, and that they are not given to a strategy that
// would ignore them.
func checkDocumentFlags(fs *flag.FlagSet, strategy fixpoint.Strategy, lim *fixpoint.Limits) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if given["merge-model"] && strategy != fixpoint.StrategyParallel {
		return usageError{Err: fmt.Errorf("--merge-model is for --strategy parallel, which merges the values of a document's chunks, not --strategy %s", strategy)}
	}
	if given["merge-model"] && strings.TrimSpace(lim.MergeModel) == "" {
		return usageError{Err: errors.New("--merge-model is empty: name a model, or leave the flag out to merge by rule")}
	}
	if !strategy.Document() {
		for _, name := range documentStrategyFlags {
			if given[name] {
				return usageError{Err: fmt.Errorf("--%s is for the document strategies (parallel, sequential, agent), not --strategy %s", name, strategy)}
			}
		}
		lim.ListPasses = 0
		return nil
	}
	if strategy == fixpoint.StrategyAgent {
		if given["list-passes"] {
			return usageError{Err: errors.New("--list-passes is for strategies parallel and sequential: the agent reads the chunks it chooses through tools")}
		}
		lim.ListPasses = 0
	}
	if lim.ListPasses < 0 {
		return usageError{Err: fmt.Errorf("--list-passes %d: want 0 (none) or more", lim.ListPasses)}
	}
	if lim.ChunkTokens < 0 || lim.ChunkTokens > 0 && lim.ChunkTokens < chunkTokensMin {
		return usageError{Err: fmt.Errorf("--chunk-tokens %d: want %d or more (0 = %d)", lim.ChunkTokens, chunkTokensMin, fixpoint.ChunkTokensDefault)}
	}
	if lim.ChunkOverlap < 0 {
		return usageError{Err: fmt.Errorf("--chunk-overlap %d: want 0 or more", lim.ChunkOverlap)}
	}
	if given["chunk-overlap"] && lim.ChunkTokens == 0 {
		// An overlap given alone is over the default size; set the size so
		// that 0 stays 0 (Limits.WithDefaults reads 0 as "not given").
		lim.ChunkTokens = fixpoint.ChunkTokensDefault
	}
	if size := max(lim.ChunkTokens, 0); size > 0 && lim.ChunkOverlap >= size {
		return usageError{Err: fmt.Errorf("--chunk-overlap %d must be less than --chunk-tokens %d: each chunk would repeat the whole of the previous one", lim.ChunkOverlap, size)}
	}
	if v := lim.MaxValidationAttempts; v < 0 || v > fixpoint.MaxAttemptsMax {
		return usageError{Err: fmt.Errorf("--max-validation-attempts %d: want 1 to %d (0 = %d)", v, fixpoint.MaxAttemptsMax, fixpoint.ValidationAttemptsDefault)}
	}
	return nil
}

// checkStrategy refuses a strategy fixpoint does not know, naming them.
func checkStrategy(flagName, s string) error {
	if s == "" {
		return nil
	}
	for _, name := range fixpoint.StrategyNames() {
		if s == name {
			return nil
		}
	}
	return usageError{Err: errors.New(flagName + " " + fmt.Sprintf("%q", s) + ": want one of " + strings.Join(fixpoint.StrategyNames(), ", "))}
}
