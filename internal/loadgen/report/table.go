package report

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// tableWidth is the width the text tables keep within: a terminal of 100
// columns shows them unwrapped. report.json keeps every text whole.
const tableWidth = 100

// cellKind says how a column is laid out.
type cellKind int

const (
	figure cellKind = iota // right-aligned, never cut
	name                   // left-aligned, never cut (a row's label)
	text                   // left-aligned, cut to fit the width
)

type column struct {
	head string
	kind cellKind
}

// textTable lays rows out in columns within tableWidth: when they are too
// wide, the widest text columns give way, and a cell cut to fit ends in
// "…[n]", n numbering its whole text in the notes printed below.
type textTable struct {
	cols []column
	rows [][]string
}

// tableNotes are the whole texts of cut cells and the reasons of rows
// without figures, printed below a table, each wrapped to tableWidth.
type tableNotes struct {
	lines []string
}

// add keeps text and returns its number.
func (n *tableNotes) add(text string) int {
	n.lines = append(n.lines, text)
	return len(n.lines)
}

func (n *tableNotes) write(w io.Writer) error {
	for i, line := range n.lines {
		prefix := fmt.Sprintf("[%d] ", i+1)
		if _, err := io.WriteString(w, wrap(prefix, line, tableWidth)); err != nil {
			return err
		}
	}
	n.lines = nil
	return nil
}

// minTextWidth is as narrow as a text column gets: short texts (a
// duration, "yes") stay whole.
const minTextWidth = 12

func (t *textTable) write(w io.Writer, notes *tableNotes) error {
	heads := make([][]string, len(t.cols)) // a head may take several lines
	headLines := 1
	widths := make([]int, len(t.cols))
	for i, c := range t.cols {
		heads[i] = strings.Split(c.head, "\n")
		headLines = max(headLines, len(heads[i]))
		for _, h := range heads[i] {
			widths[i] = max(widths[i], utf8.RuneCountInString(h))
		}
		for _, row := range t.rows {
			widths[i] = max(widths[i], utf8.RuneCountInString(row[i]))
		}
	}
	gap := 2
	total := func(from int) int {
		sum := gap * (len(widths) - from - 1)
		for _, wd := range widths[from:] {
			sum += wd
		}
		return sum
	}
	for total(0) > tableWidth {
		widest := -1
		for i, c := range t.cols {
			floor := minTextWidth
			for _, h := range heads[i] {
				floor = max(floor, utf8.RuneCountInString(h))
			}
			if c.kind == text && widths[i] > floor && (widest < 0 || widths[i] > widths[widest]) {
				widest = i
			}
		}
		if widest < 0 {
			break // figures and names are never cut
		}
		widths[widest]--
	}
	if total(0) > tableWidth { // figures alone too wide: closer together
		gap = 1
	}
	// Still too wide: each row's name goes on a line of its own, above its
	// figures, which then start at stackIndent.
	first, indent := 0, ""
	if total(0) > tableWidth && t.cols[0].kind == name {
		gap, first, indent = 2, 1, strings.Repeat(" ", stackIndent)
		if total(1)+stackIndent > tableWidth {
			gap = 1
		}
	}
	var err error
	emit := func(s string) {
		if err == nil {
			_, err = io.WriteString(w, strings.TrimRight(s, " ")+"\n")
		}
	}
	line := func(cells []string, cut bool) {
		var b strings.Builder
		b.WriteString(indent)
		for i := first; i < len(cells); i++ {
			cell := cells[i]
			if i > first {
				b.WriteString(strings.Repeat(" ", gap))
			}
			if cut && t.cols[i].kind == text && utf8.RuneCountInString(cell) > widths[i] {
				marker := fmt.Sprintf("…[%d]", notes.add(cell))
				cell = truncate(cell, widths[i]-utf8.RuneCountInString(marker)) + marker
			}
			pad := strings.Repeat(" ", max(0, widths[i]-utf8.RuneCountInString(cell)))
			if t.cols[i].kind == figure {
				b.WriteString(pad + cell)
			} else {
				b.WriteString(cell + pad)
			}
		}
		emit(b.String())
	}
	for l := range headLines { // heads end on the last line, above the figures
		cells := make([]string, len(t.cols))
		for i, h := range heads {
			if k := l - (headLines - len(h)); k >= 0 {
				cells[i] = h[k]
			}
		}
		line(cells, false)
	}
	for _, row := range t.rows {
		if first == 1 {
			emit(row[0])
		}
		line(row, true)
	}
	return err
}

// stackIndent indents the figures of a row whose name is on the line
// above them.
const stackIndent = 2

// truncate keeps the first n runes of s.
func truncate(s string, n int) string {
	if n <= 0 {
		return ""
	}
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}

// wrap breaks text into lines of at most width runes at spaces, the first
// starting with prefix and the others indented as far.
func wrap(prefix, text string, width int) string {
	indent := strings.Repeat(" ", utf8.RuneCountInString(prefix))
	var b strings.Builder
	line := prefix
	lineStart := true
	for _, word := range strings.Fields(text) {
		if !lineStart && utf8.RuneCountInString(line)+1+utf8.RuneCountInString(word) > width {
			b.WriteString(line + "\n")
			line, lineStart = indent, true
		}
		if !lineStart {
			line += " "
		}
		line += word
		lineStart = false
	}
	b.WriteString(line + "\n")
	return b.String()
}
