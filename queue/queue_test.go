package queue_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/queue"
)

// MsgID and JobIDFromMsgID round-trip every id, with or without a
// republish suffix, and distinct ids get distinct message ids a header can
// carry.
func TestMsgIDRoundTrip(t *testing.T) {
	t.Parallel()
	seen := map[string]string{}
	for _, id := range []string{"a", "b:1", "x\ny", "x y", "x%0Ay", "x#y", "é", "tab\there", "%", "#", ""} {
		m := queue.MsgID(id)
		if strings.ContainsAny(m, " \n\r\t#") && !strings.HasPrefix(m, "#") {
			t.Errorf("MsgID(%q) = %q holds a character a header cannot carry or the republish mark", id, m)
		}
		if other, ok := seen[m]; ok {
			t.Errorf("MsgID(%q) = MsgID(%q) = %q", id, other, m)
		}
		seen[m] = id
		for _, suffix := range []string{"", "#r1"} {
			back, ok := queue.JobIDFromMsgID(m + suffix)
			if !ok || back != id {
				t.Errorf("JobIDFromMsgID(%q) = %q, %v; want %q", m+suffix, back, ok, id)
			}
		}
	}
}

// EnsureStream refuses a subject the existing stream does not take (enqueue
// would publish into nothing), matching NATS wildcards in the stream's
// subjects, and says when it created the stream; names NATS refuses are
// setting errors before anything is asked of the server.
func TestEnsureStreamSubjects(t *testing.T) {
	t.Parallel()
	js := serverJS(t, t.TempDir(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q := queue.Config{Stream: "Q_SUBJECTS", Subject: "q.subjects", Consumer: "w"}
	if _, created, err := queue.EnsureStream(ctx, js, q); err != nil || !created {
		t.Fatalf("the harness's stream, first: created %v, %v; want it created", created, err)
	}
	if _, created, err := queue.EnsureStream(ctx, js, q); err != nil || created {
		t.Fatalf("the harness's stream, again: created %v, %v; want it found", created, err)
	}
	typo := q
	typo.Subject = q.Subject + "x"
	if _, _, err := queue.EnsureStream(ctx, js, typo); !errors.Is(err, queue.ErrSubjectNotInStream) || !strings.Contains(err.Error(), typo.Subject) {
		t.Errorf("subject %s: %v, want ErrSubjectNotInStream naming it", typo.Subject, err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: q.Stream + "_WC", Subjects: []string{q.Subject + "wc.*.jobs", q.Subject + "all.>"}}); err != nil {
		t.Fatal(err)
	}
	for subject, ok := range map[string]bool{"wc.a.jobs": true, "all.x.y": true, "wc.a.b.jobs": false, "all": false, "wc.a": false} {
		wc := queue.Config{Stream: q.Stream + "_WC", Subject: q.Subject + subject}
		if _, _, err := queue.EnsureStream(ctx, js, wc); (err == nil) != ok {
			t.Errorf("subject %s on a stream of %s.wc.*.jobs and %s.all.>: %v, want accepted %v", wc.Subject, q.Subject, q.Subject, err, ok)
		}
	}
	fresh := queue.Config{Stream: q.Stream + "_NEW", Subject: q.Subject + "new"}
	if _, created, err := queue.EnsureStream(ctx, js, fresh); err != nil || !created {
		t.Errorf("a new stream: created %v, %v; want created", created, err)
	}
	for _, bad := range []queue.Config{{Stream: "a.b"}, {Stream: "a b"}, {Subject: "jobs.*"}, {Subject: "jobs.>"}, {Subject: "a..b"}, {Subject: "a b"},
		{Replicas: 2}, {Replicas: 4}, {Replicas: 6}, {Replicas: -1}} {
		var se *fixpoint.SettingError
		if _, _, err := queue.EnsureStream(ctx, js, bad); !errors.As(err, &se) {
			t.Errorf("%+v: %v, want a setting error", bad, err)
		}
	}
}
