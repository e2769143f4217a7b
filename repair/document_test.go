package repair_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/repair"
	"github.com/fixpoint-dev/fixpoint/validate"
)

// TestDocumentGoesFirstInTheTask: a job's document is in its first user
// message, byte for byte between the document markers and before the
// prompt, in every round (a repair-strategy round repeats it in the task),
// and the attempts keep a line naming it instead of its text, while the
// request hash is of what was sent.
func TestDocumentGoesFirstInTheTask(t *testing.T) {
	t.Parallel()
	schema, err := validate.Compile([]byte(`{"type":"object","properties":{"party":{"type":"string"}},"required":["party"]}`))
	if err != nil {
		t.Fatal(err)
	}
	// Kept byte for byte: CRLF, a tab, trailing spaces, no final newline.
	doc := "CONTRACT\r\n\tParty: Acme GmbH  \r\nTerm: 12 months"
	for _, strategy := range []fixpoint.Strategy{fixpoint.StrategyConversation, fixpoint.StrategyRepair} {
		t.Run(string(strategy), func(t *testing.T) {
			t.Parallel()
			job := &repair.Job{ID: "doc-1", Schema: schema, SchemaRaw: []byte(`{"type":"object","properties":{"party":{"type":"string"}},"required":["party"]}`),
				Model: "m", Prompt: "Who is the party?", Document: doc, Limits: fixpoint.Limits{MaxAttempts: 2, Strategy: strategy}}
			step, err := repair.Start(job, nil, repair.Config{})
			if err != nil {
				t.Fatal(err)
			}
			want := fixpoint.DocumentOpen + "\n" + doc + "\n" + fixpoint.DocumentClose + "\n\nWho is the party?"
			act := step.Next()
			if got := act.Request.Messages[0].Content; got != want {
				t.Fatalf("first user message = %q, want %q", got, want)
			}
			a, act := step.Feed(&fixpoint.Response{Text: `{"name": 1}`, FinishReason: fixpoint.FinishStop}, nil, time.Now())
			if a.Valid {
				t.Fatal("a reply without party was valid")
			}
			if strings.Contains(string(a.Request), "Acme") {
				t.Errorf("the attempt keeps the document's text: %s", a.Request)
			}
			if !strings.Contains(string(a.Request), fmt.Sprintf("%d bytes", len(doc))) {
				t.Errorf("the attempt's request does not name the document's size: %s", a.Request)
			}
			sent, _ := json.Marshal(act.Request.Messages)
			if strings.Count(string(sent), "Party: Acme GmbH") != 1 {
				t.Errorf("round 2 sends the document %d times, want once: %s", strings.Count(string(sent), "Party: Acme GmbH"), sent)
			}
			if last := act.Request.Messages[len(act.Request.Messages)-1].Content; strategy == fixpoint.StrategyRepair && !strings.Contains(last, fixpoint.TaskOpen+"\n"+want) {
				t.Errorf("the repair round's task is not the document and the prompt: %q", last)
			}
			// The hash is of the messages as sent: another document of
			// the same size keeps the same request and has another hash.
			other := *job
			other.Document = strings.Replace(doc, "Acme", "Zeta", 1)
			step2, err := repair.Start(&other, nil, repair.Config{})
			if err != nil {
				t.Fatal(err)
			}
			step2.Next()
			b, _ := step2.Feed(&fixpoint.Response{Text: `{"name": 1}`, FinishReason: fixpoint.FinishStop}, nil, time.Now())
			if string(b.Request) != string(a.Request) || b.RequestHash == a.RequestHash {
				t.Errorf("two documents of one size: requests equal %v (want true), hashes equal %v (want false)", string(b.Request) == string(a.Request), b.RequestHash == a.RequestHash)
			}
		})
	}
}

// TestNoDocumentNoBlock: a job without a document sends its prompt as it
// is, as before documents existed.
func TestNoDocumentNoBlock(t *testing.T) {
	t.Parallel()
	jobs := orderJobs(t, 1, fixpoint.StrategyConversation)
	step, err := repair.Start(jobs[0], nil, repair.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if got := step.Next().Request.Messages[0].Content; got != jobs[0].Prompt {
		t.Fatalf("first user message = %q, want the prompt %q", got, jobs[0].Prompt)
	}
}
