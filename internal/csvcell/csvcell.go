// Package csvcell writes CSV cells that a spreadsheet opens as text: the
// one rule report export and the dashboard's export share.
package csvcell

import (
	"regexp"
	"strings"
)

// Text is s as a CSV text cell: with a ' in front when a spreadsheet would
// run it as a formula (it starts with =, +, -, @, a tab or a carriage
// return: OWASP's advice on CSV injection). A plain number is not a
// formula, and stays a number (a dataset's negative amounts come back as
// their text).
func Text(s string) string {
	if s == "" || !strings.ContainsRune("=+-@\t\r", rune(s[0])) || plainNumber.MatchString(s) {
		return s
	}
	return "'" + s
}

// plainNumber is a decimal number, as a spreadsheet reads one.
var plainNumber = regexp.MustCompile(`^[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?$`)
