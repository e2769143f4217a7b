package repair_test

import (
	"testing"

	"github.com/fixpoint-dev/fixpoint"
)

// A requeued job (Job.Run 2, as enqueue requeue sends it) is answered
// afresh on the simulator, as a real model would answer, and not with the
// first run's replies byte for byte; the same run again gets the same
// replies (a seed reproduces a batch).
func TestRequeuedJobIsAnsweredAfresh(t *testing.T) {
	t.Parallel()
	c := simCompleter(t, "messy")
	const n = 30
	first := syncDrive(t, c, orderJobs(t, n, fixpoint.StrategyConversation))
	again := syncDrive(t, c, orderJobs(t, n, fixpoint.StrategyConversation))
	jobs := orderJobs(t, n, fixpoint.StrategyConversation)
	for _, j := range jobs {
		j.Run = 2
	}
	requeued := syncDrive(t, c, jobs)
	differ := 0
	for i := range n {
		if replies(again[i]) != replies(first[i]) {
			t.Fatalf("job %s, run 1 twice, answered differently:\n%s\n%s", jobs[i].ID, replies(first[i]), replies(again[i]))
		}
		if replies(requeued[i]) != replies(first[i]) {
			differ++
		}
	}
	if differ < n/2 {
		t.Errorf("run 2 got the replies of run 1 for %d of %d jobs: a requeue replays the first run", n-differ, n)
	}
}

// replies is the text of every reply of a result, in order.
func replies(r *fixpoint.Result) string {
	var out string
	for _, a := range r.Attempts {
		out += a.Raw + "\x00"
	}
	return out
}
