package main

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// mutant is one small defect: the exact text to find in a file (it must
// occur exactly once) and what replaces it.
type mutant struct {
	id, what    string
	file        string
	original    string
	replacement string
	line        int // of its header in the list, for messages
}

// parseMutants reads a mutant list. Each mutant is a block:
//
//	== id: what the defect is, in one line
//	file path/from/the/module/root
//	-original line (everything after the '-', indentation included)
//	+replacement line (none: the original is deleted)
//
// Several '-' or '+' lines make a multi-line snippet. Lines starting with
// '#' and blank lines between blocks are ignored.
func parseMutants(r io.Reader) ([]mutant, error) {
	var (
		list []mutant
		cur  *mutant
		orig []string
		repl []string
		n    int
	)
	flush := func() error {
		if cur == nil {
			return nil
		}
		if cur.file == "" || len(orig) == 0 {
			return fmt.Errorf("line %d: mutant %s needs a file and a '-' line", cur.line, cur.id)
		}
		cur.original, cur.replacement = strings.Join(orig, "\n"), strings.Join(repl, "\n")
		if cur.original == cur.replacement {
			return fmt.Errorf("line %d: mutant %s changes nothing", cur.line, cur.id)
		}
		list = append(list, *cur)
		cur, orig, repl = nil, nil, nil
		return nil
	}
	seen := map[string]bool{}
	scanner := bufio.NewScanner(r)
	for scanner.Scan() {
		n++
		line := scanner.Text()
		switch {
		case strings.HasPrefix(line, "== "):
			if err := flush(); err != nil {
				return nil, err
			}
			id, what, ok := strings.Cut(strings.TrimPrefix(line, "== "), ": ")
			if !ok || id == "" || what == "" {
				return nil, fmt.Errorf("line %d: want '== id: description'", n)
			}
			if seen[id] {
				return nil, fmt.Errorf("line %d: mutant %s listed twice", n, id)
			}
			seen[id] = true
			cur = &mutant{id: id, what: what, line: n}
		case cur == nil && (line == "" || strings.HasPrefix(line, "#")):
		case cur == nil:
			return nil, fmt.Errorf("line %d: outside a mutant: %q", n, line)
		case strings.HasPrefix(line, "file "):
			cur.file = strings.TrimSpace(strings.TrimPrefix(line, "file "))
		case strings.HasPrefix(line, "-"):
			orig = append(orig, line[1:])
		case strings.HasPrefix(line, "+"):
			repl = append(repl, line[1:])
		case strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#"):
		default:
			return nil, fmt.Errorf("line %d: mutant %s: unexpected %q", n, cur.id, line)
		}
	}
	if err := scanner.Err(); err != nil {
		return nil, err
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return list, nil
}

// apply returns src with m applied; an error when its original text does
// not occur exactly once (the code moved on and the list must follow).
func (m mutant) apply(src string) (string, error) {
	switch c := strings.Count(src, m.original); c {
	case 1:
		return strings.Replace(src, m.original, m.replacement, 1), nil
	case 0:
		return "", fmt.Errorf("mutant %s: its original text is not in %s", m.id, m.file)
	default:
		return "", fmt.Errorf("mutant %s: its original text occurs %d times in %s", m.id, c, m.file)
	}
}
