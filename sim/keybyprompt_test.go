package sim

import (
	"testing"
)

// With KeyByPrompt, two jobs with different ids and the same prompt get the
// same reply (a benchmark compares two batches of one dataset); without it
// the job id picks the task.
func TestKeyByPrompt(t *testing.T) {
	t.Parallel()
	reply := func(cfg Config, user string) string {
		t.Helper()
		s := New(cfg)
		body := orderRequest("same")
		body["user"] = user
		text, _ := openAIText(t, do(t, s, "/v1/chat/completions", body).Body.Bytes())
		return text
	}
	differ := 0
	for _, u := range []string{"batch-a:1", "batch-b:1", "batch-c:1", "batch-d:1"} {
		cfg, err := Preset("messy")
		if err != nil {
			t.Fatal(err)
		}
		cfg.Seed, cfg.Now = 3, fixedNow
		if a, b := reply(cfg, "batch-0:1"), reply(cfg, u); a != b {
			differ++
		}
		cfg.KeyByPrompt = true
		if a, b := reply(cfg, "batch-0:1"), reply(cfg, u); a != b {
			t.Fatalf("KeyByPrompt: job ids batch-0:1 and %s got different replies:\n%s\n%s", u, a, b)
		}
	}
	if differ == 0 {
		t.Error("without KeyByPrompt every job id got the same reply: the id does not pick the task")
	}
}
