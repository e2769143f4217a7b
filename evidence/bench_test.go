package evidence

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// benchSource returns about size bytes of invoice-like prose in English,
// German, French and Japanese, with numbers and dates written in every
// form the package reads.
func benchSource(size int) string {
	rng := rand.New(rand.NewPCG(1, 2))
	words := strings.Fields(`the invoice total payment customer order shipped delivery contract
		term vendor account balance refund charge ticket support service monthly annual
		Rechnung Betrag Lieferung Kunde Vertrag Zahlung fällig Bestellung Straße
		facture montant livraison société échéance paiement commande client
		請求書 合計 支払 顧客 東京 株式会社 納品 契約`)
	months := []string{"January", "März", "mars", "Dezember", "août", "October"}
	var b strings.Builder
	for b.Len() < size {
		switch rng.IntN(12) {
		case 0:
			fmt.Fprintf(&b, "%d,%03d.%02d ", rng.IntN(99), rng.IntN(1000), rng.IntN(100))
		case 1:
			fmt.Fprintf(&b, "%d.%03d,%02d € ", rng.IntN(99), rng.IntN(1000), rng.IntN(100))
		case 2:
			fmt.Fprintf(&b, "%02d.%02d.20%02d ", 1+rng.IntN(28), 1+rng.IntN(12), rng.IntN(40))
		case 3:
			fmt.Fprintf(&b, "%d %s 20%02d ", 1+rng.IntN(28), months[rng.IntN(len(months))], rng.IntN(40))
		case 4:
			fmt.Fprintf(&b, "20%02d年%d月%d日 ", rng.IntN(40), 1+rng.IntN(12), 1+rng.IntN(28))
		default:
			for range 6 {
				b.WriteString(words[rng.IntN(len(words))])
				b.WriteByte(' ')
			}
			b.WriteString(". ")
		}
	}
	return b.String()
}

// benchTail and benchValue are the end of the benchmark source and a value
// of 50 distinct leaves aligned to it: found as written, in other case, as
// numbers and dates written another way, fuzzily, and not at all (the
// costliest: every stage runs). Writing them at the end makes every search
// run through the whole text.
func benchTail() string {
	var b strings.Builder
	for i := range 20 {
		fmt.Fprintf(&b, "Vendor %d: Acme Corporation International Holdings Branch %c. ", i, 'A'+i)
	}
	for i := range 5 {
		fmt.Fprintf(&b, "Total %d.249,%02d €, due %d. März 2037, contact Jonathan Livingstone-Smith%c. ", i, i, i+1, 'A'+i)
	}
	return b.String()
}

func benchValue() map[string]any {
	v := map[string]any{}
	add := func(kind string, x any) { v[fmt.Sprintf("%s%02d", kind, len(v))] = x }
	for i := range 10 {
		add("exact", fmt.Sprintf("Acme Corporation International Holdings Branch %c", 'A'+i))
		add("upper", strings.ToUpper(fmt.Sprintf("Acme Corporation International Holdings Branch %c", 'K'+i)))
		add("absent", fmt.Sprintf("Globex Intergalactic Widgets Division %d of Springfield", i))
	}
	for i := range 5 {
		add("number", json.Number(fmt.Sprintf("%d249.%02d", i, i)))
		add("date", fmt.Sprintf("2037-03-%02d", i+1))
		add("fuzzy", fmt.Sprintf("Jonathan Livingston-Smith%c", 'A'+i))
		add("absentnum", json.Number(fmt.Sprintf("98765432%d.5", i)))
	}
	return v
}

// BenchmarkAlign1MB: index a 1 MB source and align a 50-leaf value to it
// (index+align, the figure docs/evidence.md quotes), and align the value
// to a source indexed once (align).
func BenchmarkAlign1MB(b *testing.B) {
	src := benchSource(1<<20) + benchTail()
	v := benchValue()
	r := New(src).Align(v, nil)
	if len(r.Leaves) != 50 || r.Summary != (Summary{Exact: 10, Normalized: 20, Fuzzy: 5, None: 15}) {
		b.Fatalf("%d leaves, summary %+v", len(r.Leaves), r.Summary)
	}
	b.Run("index+align", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			New(src).Align(v, nil)
		}
	})
	b.Run("align", func(b *testing.B) {
		s := New(src)
		b.ResetTimer()
		for b.Loop() {
			s.Align(v, nil)
		}
	})
}
