package sim

import (
	"errors"
	"fmt"
	"slices"
)

// ErrUnknownPreset is matched by the error Preset returns for a name it does
// not know.
var ErrUnknownPreset = errors.New("unknown preset")

// PresetInfo names a preset and says what it does in one line.
type PresetInfo struct {
	Name        string
	Description string
}

var presets = []struct {
	PresetInfo
	cfg Config
}{
	{PresetInfo{"clean", "no faults: every reply is the schema-valid ground truth, instantly"}, Config{}},
	{PresetInfo{"typical", "a realistic model: ~25% formatting faults, ~15% content faults, ~10% shape faults (8.5% locally repairable), 3% rule breaks, 3% invented values, 2% truncation, 1% refusal, 2-3% faulty JSON Patch ops, no transport faults; over a long document, 3% of absent fields invented and lists cut at 50 items"}, Config{
		Mix:          typicalMix,
		FixProb:      0.9,
		NewFaultProb: 0.05,
		MaxListItems: typicalListItems,
	}},
	{PresetInfo{"messy", "a weak model: ~40% formatting faults, ~50% content faults, ~29% shape faults (23% locally repairable), 8% rule breaks, 10% invented values, 5% truncation, 2% refusal, 2% empty, 5-8% faulty JSON Patch ops; over a long document, 10% of absent fields invented and lists cut at 30 items"}, Config{
		Mix: Mix{
			Refusal: 0.02, Empty: 0.02, Truncation: 0.05,
			WrongType: 0.15, MissingRequired: 0.15, ExtraProperty: 0.12, EnumViolation: 0.12, OutOfRange: 0.10,
			Fence: 0.15, Prose: 0.12, TrailingComma: 0.08, SingleQuotes: 0.05, PythonLiterals: 0.05, Comments: 0.05,
			ScalarAsString: 0.06, EnumCase: 0.07, SingleForArray: 0.03, NullOptional: 0.03, RenamedKey: 0.04, NumberProse: 0.02, EnumSynonym: 0.04,
			PatchBadPointer: 0.05, PatchWrongOp: 0.05, PatchExtraOp: 0.08,
			RuleBreak: 0.08, Invented: 0.10, InventedAbsent: 0.10,
		},
		FixProb:      0.8,
		NewFaultProb: 0.1,
		MaxListItems: 30,
	}},
	{PresetInfo{"rate-limited", "typical replies behind a budget of 600 requests and 2M tokens per minute per model and key (429 with the real headers); requests are the binding budget"}, Config{
		Mix:          typicalMix,
		FixProb:      0.9,
		NewFaultProb: 0.05,
		RPM:          600,
		TPM:          2_000_000,
		MaxListItems: typicalListItems,
	}},
	{PresetInfo{"chaos", "typical replies plus transport faults: 5% 429 with Retry-After, 3% 500, 2% 503, 2% 529, 2% resets, 2% malformed bodies, 1% trickles, 0.5% hangs"}, Config{
		Mix:          typicalMix,
		FixProb:      0.9,
		NewFaultProb: 0.05,
		Transport: Transport{
			RateLimited: 0.05, Status500: 0.03, Status503: 0.02, Status529: 0.02,
			Reset: 0.02, Malformed: 0.02, Trickle: 0.01, Hang: 0.005,
		},
		MaxListItems: typicalListItems,
	}},
}

var typicalMix = Mix{
	Refusal: 0.01, Empty: 0.005, Truncation: 0.02,
	WrongType: 0.04, MissingRequired: 0.04, ExtraProperty: 0.03, EnumViolation: 0.03, OutOfRange: 0.025,
	Fence: 0.10, Prose: 0.06, TrailingComma: 0.04, SingleQuotes: 0.02, PythonLiterals: 0.02, Comments: 0.03,
	ScalarAsString: 0.03, EnumCase: 0.02, SingleForArray: 0.01, NullOptional: 0.015, RenamedKey: 0.01, NumberProse: 0.01, EnumSynonym: 0.01,
	PatchBadPointer: 0.02, PatchWrongOp: 0.02, PatchExtraOp: 0.03,
	RuleBreak: 0.03, Invented: 0.03, InventedAbsent: 0.03,
}

// typicalListItems is the longest list typical's model gives in one reply
// over a long document.
const typicalListItems = 50

// Preset returns the named configuration (see PresetNames). Callers set Seed,
// Latency and the rest on the result.
func Preset(name string) (Config, error) {
	for _, p := range presets {
		if p.Name == name {
			return p.cfg, nil
		}
	}
	return Config{}, fmt.Errorf("load preset %q: %w (have %v)", name, ErrUnknownPreset, presetNameList())
}

// PresetNames lists the presets with their one-line descriptions, in the
// order --help shows them.
func PresetNames() []PresetInfo {
	out := make([]PresetInfo, len(presets))
	for i, p := range presets {
		out[i] = p.PresetInfo
	}
	return out
}

func presetNameList() []string {
	var names []string
	for _, p := range presets {
		names = append(names, p.Name)
	}
	return slices.Clip(names)
}
