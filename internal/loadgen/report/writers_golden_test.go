package report

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The writers print what they printed before loadgen was split into
// packages: the goldens were written by the code of commit e4f8240 from
// testdata/filled_report.json (every field set; its first row's error
// cleared and a second row added, so each table has rows). A change of the
// table, report.html or the one-line summary shows here. Since: the results
// table of report.html, which the live page shares (ResultsHTML), marks
// itself and its rows (data-results, data-row) and has the duplicate
// orders and undersold units of runs with orders.
func TestWritersPrintWhatTheyPrintedBeforeTheSplit(t *testing.T) {
	rep, err := ReadReport(filepath.Join("testdata", "filled_report.json"))
	if err != nil {
		t.Fatal(err)
	}
	rep.Stages[0].Skipped, rep.Stages[0].Error = "", ""
	second := rep.Stages[0]
	second.Index, second.Label, second.Fault = 1, "second", nil
	rep.Stages = append(rep.Stages, second)

	var table, page, lines bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteHTML(&page); err != nil {
		t.Fatal(err)
	}
	for i := range rep.Stages {
		lines.WriteString(rep.Stages[i].SummaryLine() + "\n")
	}
	for _, tc := range []struct {
		golden string
		got    []byte
	}{
		{"table.golden.txt", table.Bytes()},
		{"report.golden.html", page.Bytes()},
		{"summary.golden.txt", lines.Bytes()},
	} {
		want, err := os.ReadFile(filepath.Join("testdata", tc.golden))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(tc.got, want) {
			t.Errorf("%s differs; got:\n%s", tc.golden, tc.got)
		}
	}
}
