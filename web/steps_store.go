package web

import (
	"encoding/json"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/store"
)

// storeStepInput is what a ledger attempt holds of its document step. A
// list that does not read shows as none: the card still shows the reply.
func storeStepInput(a store.Attempt) stepInput {
	in := stepInput{Kind: fixpoint.StepKind(a.Step), Chunk: a.Chunk, Request: a.Request,
		NoCall: noCall(a.Step, a.TokensIn+a.TokensOut, a.Raw, a.RequestHash)}
	_ = json.Unmarshal(a.ToolCalls, &in.ToolCalls)
	_ = json.Unmarshal(a.Conflicts, &in.Conflicts)
	return in
}
