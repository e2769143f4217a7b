package web

import "github.com/fixpoint-dev/fixpoint/store"

// storeStepInput is what a ledger attempt holds of its document step.
func storeStepInput(a store.Attempt) stepInput {
	return stepInput{Request: a.Request}
}
