// Package invoices is the batch of large values the benchmark's patch
// figure runs: an invoice schema with 30 to 60 line items, its prompt
// template and a generated dataset. A failed reply there is one bad field
// among hundreds, which a patch re-ask fixes without the model writing the
// whole invoice again.
package invoices

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// Schema is the invoice the model is asked to extract.
const Schema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "invoice",
  "type": "object",
  "properties": {
    "invoice_number": {"type": "string", "minLength": 3, "maxLength": 20},
    "vendor": {"type": "string", "minLength": 2, "maxLength": 60},
    "currency": {"enum": ["EUR", "USD", "GBP"]},
    "paid": {"type": "boolean"},
    "line_items": {
      "type": "array", "minItems": 30, "maxItems": 60,
      "items": {
        "type": "object",
        "properties": {
          "description": {"type": "string", "minLength": 3, "maxLength": 60},
          "qty": {"type": "integer", "minimum": 1, "maximum": 1000},
          "unit_price": {"type": "number", "minimum": 0, "maximum": 100000},
          "tax_code": {"enum": ["standard", "reduced", "zero", "exempt"]}
        },
        "required": ["description", "qty", "unit_price", "tax_code"],
        "additionalProperties": false
      }
    }
  },
  "required": ["invoice_number", "vendor", "currency", "paid", "line_items"],
  "additionalProperties": false
}`

// Template renders an invoice's text into the prompt.
const Template = `Extract this invoice from {{.vendor}}, every line item in order.

{{.text}}`

// Dataset generates n invoices of 30 to 60 lines as JSONL, the same for the
// same seed.
func Dataset(n int, seed uint64) string {
	rng := rand.New(rand.NewPCG(seed, 0x1a01ce))
	vendors := []string{"Acme Office Supply", "Nordic Timber AB", "Cafe Lumen", "Kowalski Electrics", "Blue Harbor Freight"}
	goods := []string{"A4 paper, 500 sheets", "Stapler", "Desk lamp", "USB-C cable 2m", "Pine board 2x4", "Espresso beans 1kg",
		"Cable ties, 100", "Whiteboard marker", "Pallet freight", "Copper wire 10m", "Office chair", "Monitor arm"}
	var b strings.Builder
	for i := 0; i < n; i++ {
		lines := 30 + rng.IntN(31)
		var t strings.Builder
		fmt.Fprintf(&t, "Invoice INV-%05d\n", i+1)
		for l := 0; l < lines; l++ {
			fmt.Fprintf(&t, "%d x %s at %d.%02d\n", 1+rng.IntN(20), goods[rng.IntN(len(goods))], 1+rng.IntN(300), rng.IntN(100))
		}
		fmt.Fprintf(&b, `{"id":"INV-%05d","vendor":%q,"text":%q}`+"\n", i+1, vendors[rng.IntN(len(vendors))], t.String())
	}
	return b.String()
}
