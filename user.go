package fixpoint

import (
	"strconv"
	"strings"
)

// RunSep separates a job's id from its run in a request's end-user id
// (Request.User).
const RunSep = "#"

// RequestUser is the end-user id a job's requests carry (Request.User): the
// job's id on its first run, and the id, RunSep and the run on a later one
// (enqueue requeue), "b:r1#2". A provider takes it as an opaque end user;
// the simulator reads the run from it, so that a requeued job gets replies
// of its own there as it would from a real model, and not the first run's
// again. A job id that holds RunSep itself always carries its run, so that
// SplitRequestUser gives the id back whole.
func RequestUser(jobID string, run int) string {
	if run <= 1 && !strings.Contains(jobID, RunSep) {
		return jobID
	}
	return jobID + RunSep + strconv.Itoa(max(run, 1))
}

// SplitRequestUser is the job id and the run (1 when none) of an end-user
// id RequestUser made. Any other id is a job id of run 1.
func SplitRequestUser(user string) (jobID string, run int) {
	i := strings.LastIndex(user, RunSep)
	if i < 0 {
		return user, 1
	}
	n, err := strconv.Atoi(user[i+len(RunSep):])
	if err != nil || n < 1 || strconv.Itoa(n) != user[i+len(RunSep):] {
		return user, 1
	}
	return user[:i], n
}
