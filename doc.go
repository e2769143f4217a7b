// Package fixpoint holds the job's own vocabulary: its statuses, its limits,
// the provider request and response, an attempt and a result, the
// validation error, the errors that decide a job's fate, and the error of a
// configuration setting that cannot work. Every other package uses these
// names; none defines another name for the same thing.
//
// It imports the standard library only, so that the repair step, the
// provider clients, the queue, the ledger and the commands can all share it
// without one of them depending on another.
package fixpoint
