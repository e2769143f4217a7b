// Package cli renders what the commands print on a terminal: the batch
// summary and its legend, the failure report, attempt cards, and progress
// bars (redrawn on a terminal, plain lines elsewhere).
package cli
