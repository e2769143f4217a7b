// Package repair is the repair step: a state machine that, given a job and
// its attempts so far, says what request to send next or that the job is
// final, and given that request's reply (or provider error) records the
// attempt and decides what comes next.
//
// Extract and validate, the feedback that names each error, the three
// strategies (conversation, repair, and patch: an RFC 6902 JSON Patch of
// the last value, applied locally; see patch.go), token and retry budgets,
// and the truncation and refusal rules live here. The step does no I/O: drivers
// make the calls. [Step.Next] returns an [Action]: a request to send, a
// transient failure to wait out (call Next again to go on, or hand the job
// back and [Start] it later from its result), or done. [Step.Feed] takes
// the reply. pipeline.Loop is the synchronous driver; a driver that sends
// requests in provider batch waves, replies arriving late and in any order,
// uses the same Step (TestDriversAgree shows it records the same).
package repair
