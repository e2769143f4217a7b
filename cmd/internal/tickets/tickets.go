// Package tickets is the batch of support tickets the demo and the
// benchmark run: the schema the model fills in, the prompt template and a
// generated dataset.
package tickets

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// Schema is the contract the model is asked to fill in for each ticket.
// The customer, the order and an amount are copied from the ticket (the
// evidence stage checks them against it); the triage fields are derived,
// so they are marked "x-fixpoint-evidence": false. A rule ties two of
// them: a ticket that needs a human is not of low priority.
const Schema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "ticket_triage",
  "type": "object",
  "properties": {
    "customer": {"type": "string", "minLength": 2, "maxLength": 80},
    "order_id": {"type": "string", "pattern": "^ORD-[0-9]{5}$"},
    "amount": {"type": "number", "minimum": 0},
    "category": {"enum": ["billing", "bug", "account", "feature_request", "shipping", "other"], "x-fixpoint-evidence": false},
    "priority": {"type": "integer", "minimum": 1, "maximum": 5, "x-fixpoint-evidence": false},
    "sentiment": {"enum": ["negative", "neutral", "positive"], "x-fixpoint-evidence": false},
    "summary": {"type": "string", "minLength": 10, "maxLength": 200, "x-fixpoint-evidence": false},
    "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z][a-z0-9-]*$"}, "maxItems": 5, "uniqueItems": true, "x-fixpoint-evidence": false},
    "needs_human": {"type": "boolean"}
  },
  "required": ["customer", "order_id", "category", "priority", "sentiment", "summary", "needs_human"],
  "additionalProperties": false,
  "x-fixpoint-rules": [
    {"rule": "!self.needs_human || self.priority >= 3", "message": "a ticket that needs a human has priority 3 or more", "path": "/priority"}
  ]
}`

// Template renders a ticket into the prompt.
const Template = `Triage this support ticket from {{.customer}} ({{.plan}} plan) about order {{.order_id}}.

Subject: {{.subject}}

{{.body}}`

// Dataset generates n support tickets as JSONL, the same for the same
// seed. A body with %s states an amount there.
func Dataset(n int, seed uint64) string {
	rng := rand.New(rand.NewPCG(seed, 0xf1c5))
	customers := []string{"Ada Park", "Bruno Silva", "Chen Wei", "Dana Cohen", "Eli Novak", "Farah Khan", "Goran Ilic", "Hana Sato", "Ivan Petrov", "Jade Moreau"}
	plans := []string{"free", "starter", "pro", "enterprise"}
	issues := []struct{ subject, body string }{
		{"Charged twice this month", "I was billed twice for my subscription on the 3rd, %s each time. Please refund the duplicate charge."},
		{"App crashes on export", "Every time I export a report to PDF the app closes without a message. Version 4.2 on macOS."},
		{"Cannot reset my password", "The reset link in the email says it expired, even when I click it right away."},
		{"Please add dark mode", "Would love a dark theme for late-night work. The white background is hard on the eyes."},
		{"Package never arrived", "My order of %s was marked delivered five days ago but nothing came. Tracking shows the wrong city."},
		{"Invoice has the wrong VAT number", "Our company VAT id on the last three invoices is missing a digit. We need corrected copies."},
		{"Sync stuck at 99%", "Sync has been stuck at 99% since yesterday. I tried logging out and in again."},
		{"Love the new dashboard", "Just wanted to say the new dashboard is great. One idea: let me pin my favourite charts."},
		{"Account locked after login attempts", "I mistyped my password a few times and now my account is locked. I need access for a demo today."},
		{"Refund for annual plan", "I upgraded to annual by mistake (%s) and would like to switch back to monthly with a prorated refund."},
	}
	currencies := []string{"EUR %d.%02d", "USD %d.%02d", "$%d.%02d", "%d,%02d €"}
	moods := []string{"", " This is really frustrating.", " Thanks in advance!", " Urgent: this blocks my whole team.", " No rush."}
	var b strings.Builder
	for i := 0; i < n; i++ {
		is := issues[rng.IntN(len(issues))]
		customer, plan, order := customers[rng.IntN(len(customers))], plans[rng.IntN(len(plans))], fmt.Sprintf("ORD-%05d", 10000+rng.IntN(90000))
		body := is.body
		if strings.Contains(body, "%s") {
			body = fmt.Sprintf(body, fmt.Sprintf(currencies[rng.IntN(len(currencies))], 5+rng.IntN(500), rng.IntN(100)))
		}
		fmt.Fprintf(&b, `{"ticket_id":"T%06d","customer":%q,"plan":%q,"order_id":%q,"subject":%q,"body":%q}`+"\n",
			i+1, customer, plan, order, is.subject, body+moods[rng.IntN(len(moods))])
	}
	return b.String()
}
