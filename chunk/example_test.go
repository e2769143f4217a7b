package chunk_test

import (
	"fmt"

	"github.com/fixpoint-dev/fixpoint/chunk"
)

func ExampleSplit() {
	doc := "# Parties\n\nAcme GmbH sells. Beta Ltd buys.\n\n# Term\n\nTwelve months from signing. Renewed each year.\n"
	chunks, err := chunk.Split(doc, chunk.Options{Tokens: 12, Overlap: 8})
	if err != nil {
		panic(err)
	}
	// The first chunk ends before a heading, so the second repeats none
	// of it; the third repeats the sentence the second ended with.
	for _, c := range chunks {
		fmt.Printf("%d [%d,%d) %q\n", c.N, c.Start, c.End, c.Text)
	}
	// Output:
	// 0 [0,44) "# Parties\n\nAcme GmbH sells. Beta Ltd buys.\n\n"
	// 1 [44,80) "# Term\n\nTwelve months from signing. "
	// 2 [52,99) "Twelve months from signing. Renewed each year.\n"
}
