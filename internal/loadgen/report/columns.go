package report

import "html/template"

// A resultColumn is one column of the results: of one of the terminal's
// tables (the load a run took, what it showed) and of report.html's
// results table, which has both. Each record declares its own columns
// beside its fields (its columns method); resultColumns, beside
// StageRun's records, lists them in order. The row's name comes first in every table and is no record's.
type resultColumn struct {
	// head is the terminal table's head, "" for a column of report.html
	// alone; table says which of the tables, kind how it is laid out,
	// text its cell.
	head  string
	table resultTable
	kind  cellKind
	text  func(*StageRun) string
	// htmlHead is report.html's head, "" for a column of the terminal
	// alone; html its cell, or nil for text's, escaped.
	htmlHead string
	html     func(*StageRun) htmlCell
	// shown says whether a report shows the column (the front door's
	// columns only where a stage had a front door); nil: always.
	shown func(*Report) bool
}

// resultTable is one of the terminal's results tables.
type resultTable int

const (
	loadTable      resultTable = iota // the load each run took
	shownTable                        // what it showed
	frontDoorTable                    // a spike's front door and buyers
)

// htmlCell is a cell of report.html's results table: Value is escaped by
// the template unless it is a template.HTML.
type htmlCell struct {
	Class string
	Value any
}

// yesNoHTML is a yes or no cell, coloured.
func yesNoHTML(b bool) htmlCell {
	if b {
		return htmlCell{Value: template.HTML(`<span class="yes">yes</span>`)}
	}
	return htmlCell{Value: template.HTML(`<span class="no">no</span>`)}
}

// badIfPositive is a count's cell, marked when it is above zero.
func badIfPositive[N int | int64](n N) htmlCell {
	if n > 0 {
		return htmlCell{Class: "oversold", Value: n}
	}
	return htmlCell{Value: n}
}

// terminal are the columns of one terminal table, the row's name first.
func terminal(cols []resultColumn, t resultTable) textTable {
	table := textTable{cols: []column{{"stage", name}}}
	for _, c := range cols {
		if c.head != "" && c.table == t {
			table.cols = append(table.cols, column{c.head, c.kind})
		}
	}
	return table
}

// terminalRow is a row's cells in one terminal table, its name first.
func terminalRow(cols []resultColumn, t resultTable, r *StageRun) []string {
	row := []string{r.Heading()}
	for _, c := range cols {
		if c.head != "" && c.table == t {
			row = append(row, c.text(r))
		}
	}
	return row
}

// htmlHeads are report.html's heads after the row's name.
func htmlHeads(cols []resultColumn) []string {
	var heads []string
	for _, c := range cols {
		if c.htmlHead != "" {
			heads = append(heads, c.htmlHead)
		}
	}
	return heads
}

// htmlCells are a row's cells in report.html after its name.
func htmlCells(cols []resultColumn, r *StageRun) []htmlCell {
	var cells []htmlCell
	for _, c := range cols {
		switch {
		case c.htmlHead == "":
		case c.html != nil:
			cells = append(cells, c.html(r))
		default:
			cells = append(cells, htmlCell{Value: c.text(r)})
		}
	}
	return cells
}
