package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/llm"
)

// Every row of the provider table reaches enqueue: --help offers it, the
// provider check takes it, and --delivery batch is refused (exit 2,
// nothing recorded) for each row without a batch API.
func TestEveryProviderReachesEnqueue(t *testing.T) {
	t.Parallel()
	helps := map[string]string{}
	for _, args := range []string{"--help", "requeue --help"} {
		var out bytes.Buffer
		if code := run(context.Background(), strings.Fields(args), strings.NewReader(""), &out, &out); code != 0 {
			t.Fatalf("enqueue %s: exit %d", args, code)
		}
		// The --provider flag's line and its description's.
		_, after, _ := strings.Cut(out.String(), "\n  -provider string\n")
		helps[args], _, _ = strings.Cut(after, "\n")
	}
	w := newWorld(t)
	data := w.file("rows.jsonl", rows)
	for _, p := range llm.Providers() {
		for args, line := range helps {
			if !strings.Contains(line, p.Name) {
				t.Errorf("enqueue %s: --provider does not offer %s: %q", args, p.Name, line)
			}
		}
		cfg := enqueue.Config{Batch: "b", Schema: []byte(testSchema), Template: "{{.text}}", Format: enqueue.FormatJSONL,
			Provider: p.Name, Model: "m"}
		if err := enqueue.Check(cfg); err != nil {
			t.Errorf("enqueue.Check with provider %s: %v", p.Name, err)
		}
		if p.Has(llm.DeliveryBatch) {
			continue
		}
		batch := "nobatch-" + p.Name
		code, _, stderr := w.run("", append(w.args(batch, "--provider", p.Name, "--delivery", "batch"), data)...)
		if code != 2 || !strings.Contains(stderr, p.Name+" has no batch API") {
			t.Errorf("--provider %s --delivery batch: exit %d, stderr %q; want 2 naming the reason", p.Name, code, stderr)
		}
		w.noBatch(batch)
	}
	cfg := enqueue.Config{Batch: "b", Schema: []byte(testSchema), Template: "{{.text}}", Format: enqueue.FormatJSONL, Provider: "nonesuch", Model: "m"}
	if err := enqueue.Check(cfg); !errors.Is(err, enqueue.ErrBadConfig) || !strings.Contains(err.Error(), strings.Join(llm.ProviderNames(), ", ")) {
		t.Errorf("enqueue.Check with provider nonesuch: %v, want ErrBadConfig naming the providers", err)
	}
}
