package deploy

import "slices"

// promqlKeywords are identifiers of PromQL that are not metric names.
var promqlKeywords = []string{
	"and", "or", "unless", "bool", "offset", "inf", "nan", "atan2",
	"by", "without", "on", "ignoring", "group_left", "group_right",
	"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
	"bottomk", "topk", "quantile", "limitk", "limit_ratio",
}

// labelListKeywords are followed by a parenthesised list of label names.
var labelListKeywords = []string{"by", "without", "on", "ignoring", "group_left", "group_right"}

// metricNames lists the metric names an expression selects, in order of
// first appearance. It is a lexer, not a parser: Prometheus itself parses
// every expression in TestLiveStack; this only tells which names to look
// for in the live scrapes. Strings, label matchers, ranges, numbers,
// function names and keywords are skipped.
func metricNames(expr string) []string {
	var names []string
	isIdentStart := func(c byte) bool { return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
	isIdent := func(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }
	// skipString returns the index after the string literal starting at i.
	skipString := func(i int) int {
		quote := expr[i]
		for i++; i < len(expr) && expr[i] != quote; i++ {
			if expr[i] == '\\' && quote != '`' {
				i++
			}
		}
		return i + 1
	}
	// skipTo returns the index after the close that matches the opener at i.
	skipTo := func(i int, close byte) int {
		for i++; i < len(expr) && expr[i] != close; {
			if c := expr[i]; c == '"' || c == '\'' || c == '`' {
				i = skipString(i)
			} else {
				i++
			}
		}
		return i + 1
	}
	nextNonSpace := func(i int) int {
		for i < len(expr) && (expr[i] == ' ' || expr[i] == '\t' || expr[i] == '\n') {
			i++
		}
		return i
	}
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			i = skipString(i)
		case c == '{':
			i = skipTo(i, '}')
		case c == '[':
			i = skipTo(i, ']')
		case c >= '0' && c <= '9' || c == '.':
			for i < len(expr) && (isIdent(expr[i]) || expr[i] == '.') {
				i++
			}
		case isIdentStart(c):
			start := i
			for i < len(expr) && isIdent(expr[i]) {
				i++
			}
			ident := expr[start:i]
			next := nextNonSpace(i)
			switch {
			case slices.Contains(labelListKeywords, ident) && next < len(expr) && expr[next] == '(':
				i = skipTo(next, ')')
			case slices.Contains(promqlKeywords, ident):
			case next < len(expr) && expr[next] == '(':
				// a function call
			default:
				if !slices.Contains(names, ident) {
					names = append(names, ident)
				}
			}
		default:
			i++
		}
	}
	return names
}
