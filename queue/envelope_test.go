package queue_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/queue"
)

// A job's document travels as its hash: the message holds the hash and
// round-trips it, and anything else where a hash goes is a bad job.
func TestEnvelopeDocumentIsAHash(t *testing.T) {
	t.Parallel()
	hash := strings.Repeat("0123456789abcdef", 4)
	env := queue.Envelope{JobID: "b:1", Prompt: "name the party.", SchemaHash: "s", Provider: "openai", Model: "m", Document: hash}
	data, err := queue.EncodeEnvelope(&env)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"document":"`+hash+`"`) {
		t.Fatalf("message %s does not name the document by its hash", data)
	}
	got, err := queue.DecodeEnvelope(data)
	if err != nil || got.Document != hash {
		t.Fatalf("decoded document %q, %v; want %s", got.Document, err, hash)
	}
	for _, bad := range []string{"MASTER AGREEMENT between Acme GmbH and Zeta Ltd.", strings.ToUpper(hash), hash[:63], hash + "0"} {
		env.Document = bad
		data, _ := queue.EncodeEnvelope(&env)
		if _, err := queue.DecodeEnvelope(data); !errors.Is(err, fixpoint.ErrBadJob) || !strings.Contains(err.Error(), "is not a document hash") {
			t.Errorf("document %q: %v; want a bad job", bad, err)
		}
	}
	env.Document = ""
	data, _ = queue.EncodeEnvelope(&env)
	if strings.Contains(string(data), "document") {
		t.Errorf("a job of no document: message %s names one", data)
	}
}
