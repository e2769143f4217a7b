package ecma

// A Bounded pattern is one whose match may not finish: a pattern the
// backtracking engine matches, under the bounds of a check (package
// validate's). Its Match reports a match that ran out of time or of
// backtracking state as an error.
type Bounded interface {
	Match(s string) (bool, error)
}

// Matcher is a compiled pattern, as the schema library holds it (a
// jsonschema.Regexp): a Regexp, Go's regexp, or a Bounded pattern.
type Matcher interface {
	MatchString(s string) bool
}

// Match reports whether re matches s; an error is a match of a Bounded
// pattern that could not finish. Nothing is recorded: the check of a value
// holding s matches again, and reports it.
func Match(re Matcher, s string) (bool, error) {
	if r, ok := re.(Bounded); ok {
		return r.Match(s)
	}
	return re.MatchString(s), nil
}

// MatchOr is Match with onTimeout for a match that could not finish: the
// answer that errs on the caller's safe side.
func MatchOr(re Matcher, s string, onTimeout bool) bool {
	m, err := Match(re, s)
	if err != nil {
		return onTimeout
	}
	return m
}
