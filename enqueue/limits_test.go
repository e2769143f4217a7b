package enqueue

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint/store"
)

// The workers send the schema with every request: a schema that leaves no
// room for a prompt under their limit is refused before a row is read (a
// 200,000-value enum made a 1.3 MB system prompt for every call), and a
// row's prompt is measured with it.
func TestPromptLimitCountsTheSchema(t *testing.T) {
	t.Parallel()
	values := make([]string, 40_000)
	for i := range values {
		values[i] = fmt.Sprintf(`"v%d"`, i)
	}
	huge := `{"enum":[` + strings.Join(values, ",") + `]}`
	cfg := Config{Batch: "b", Schema: []byte(huge), Template: "{{.text}}", Model: "m", Provider: "openai", Format: FormatJSONL}
	err := Check(cfg)
	if !errors.Is(err, ErrBadSchema) || !strings.Contains(err.Error(), "leaves no room for a prompt") {
		t.Fatalf("Check with a %d-byte schema: %v; want ErrBadSchema saying it leaves no room", len(huge), err)
	}
	cfg.MaxPromptBytes = len(huge) + 1000
	if err := Check(cfg); err != nil {
		t.Fatalf("Check with room for 1000 bytes of prompt: %v", err)
	}
	if _, _, err := cfg.prepare(); err != nil {
		t.Fatal(err)
	}
	r := &renderer{cfg: &cfg, maxMsg: 8 << 20}
	for n, fits := range map[int]bool{900: true, 1100: false} {
		err := r.fits(&store.NewJob{ID: "b:1", Batch: "b", Prompt: strings.Repeat("x", n)}, "", 0)
		if (err == nil) != fits || (err != nil && !strings.Contains(err.Error(), "with the system prompt and the")) {
			t.Errorf("a %d-byte prompt with a %d-byte schema under a limit of %d: %v; want fits=%v", n, len(huge), cfg.MaxPromptBytes, err, fits)
		}
	}
}
