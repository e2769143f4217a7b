package rules

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// invoice returns an invoice value of n lines that every rule of
// invoiceSchema holds for, but the warning on more than three lines.
func invoice(n int) string {
	lines := make([]string, n)
	for i := range lines {
		lines[i] = fmt.Sprintf(`{"sku":"SKU-%04d","qty":%d,"price":2.5,"total":%g}`, i, i%5+1, float64(i%5+1)*2.5)
	}
	total := 0.0
	for i := range n {
		total += float64(i%5+1) * 2.5
	}
	return fmt.Sprintf(`{"start":"2027-01-15","end":"2027-02-01","total":%g,"lines":[%s]}`, total, strings.Join(lines, ","))
}

func BenchmarkCompile(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile([]byte(invoiceSchema)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheck checks an invoice against invoiceSchema's four rules:
// three on the invoice, one on each line.
func BenchmarkCheck(b *testing.B) {
	s := mustCompile(b, invoiceSchema)
	for _, n := range []int{3, 50, 1000} {
		v := decode(b, invoice(n))
		fs, err := s.Check(context.Background(), v)
		if err != nil || len(Errors(fs)) > 0 {
			b.Fatalf("%d lines: %v %q", n, err, texts(fs))
		}
		b.Run(fmt.Sprintf("lines=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Check(context.Background(), v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCheckAtCostLimit is the costliest check: rules each under
// CostLimit on so many items that the check stops at CheckCostLimit.
func BenchmarkCheckAtCostLimit(b *testing.B) {
	s := mustCompile(b, `{"type":"array","items":{"type":"object","properties":{"xs":{"type":"array","items":{"type":"integer"}}},
		"x-fixpoint-rules":[{"rule":"self.xs.all(a, self.xs.all(b, a <= b))"}]}}`)
	row := `{"xs":[` + strings.TrimSuffix(strings.Repeat("1,", 300), ",") + `]}`
	v := decode(b, "["+strings.TrimSuffix(strings.Repeat(row+",", 100), ",")+"]")
	b.ReportAllocs()
	for b.Loop() {
		fs, err := s.Check(context.Background(), v)
		if err != nil || len(fs) != 1 {
			b.Fatalf("%v %q", err, texts(fs))
		}
	}
}
