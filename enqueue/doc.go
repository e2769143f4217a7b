// Package enqueue turns a dataset into jobs and acts on batches afterwards.
//
// Run reads a JSONL or CSV dataset in two passes: the first renders every
// row through the prompt template and checks it (parse errors, template
// errors, ids missing or repeated with other content, messages over the
// queue's size limit, prompts over the workers' limit), records nothing and
// keeps the jobs that passed in a temporary file; the second records those
// jobs in the ledger and publishes them. Job ids are
// stable, so a run repeated records nothing new; a batch records its
// settings, which later runs must match. DryRun is the first pass with an
// estimate of tokens and cost. Requeue, Cancel and SetCap act on a batch
// that ran: a new run of chosen jobs, the end of the jobs not yet final,
// and a spend cap the workers enforce.
package enqueue
