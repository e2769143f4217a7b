package main

import (
	"context"
	"io"
)

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return usagef("bench: not implemented yet")
}
