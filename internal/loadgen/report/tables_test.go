package report

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/lockstep/lockstep/asyncorders"
	"github.com/lockstep/lockstep/inventory"
	"github.com/lockstep/lockstep/orders"
)

// The report's order stream tables say whether the workers ran through the
// load or were held, and their orders/s in the drain.
func TestTheStreamTableSaysWhetherTheWorkersWereHeld(t *testing.T) {
	drained := &asyncorders.Stats{Length: 3000}
	rep := &Report{Stages: []StageRun{
		{StageID: StageID{Stage: asyncorders.StageStream, Label: "running"}, Answers: Answers{Sales: 3000}, Drain: Drain{DrainMS: 500, DrainOrdersPerSec: 1200}, Outcome: Outcome{Audit: Audit{Stream: drained}}},
		{StageID: StageID{Stage: asyncorders.StageStream, Label: "held"}, Answers: Answers{Sales: 3000}, Drain: Drain{DrainMS: 2500, DrainOrdersPerSec: 1234, WorkersHeld: true}, Outcome: Outcome{Audit: Audit{Stream: drained}}},
	}}
	var out bytes.Buffer
	if err := writeStreamTable(rep, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	if len(lines) < 6 || !strings.Contains(lines[2], "orders/s") || !strings.Contains(lines[3], "in the drain") ||
		!regexp.MustCompile(`running +running +0\.5 +1200 +3000`).MatchString(lines[4]) ||
		!regexp.MustCompile(`held +held +2\.5 +1234 +3000`).MatchString(lines[5]) {
		t.Errorf("stream table:\n%s", out.String())
	}
	// html and the live page say it too.
	if rows := rep.Stages[1].StreamRows(); len(rows) != 1 || rows[0].When != "after draining (2.5 s, 1234 orders/s; workers held through the load)" {
		t.Errorf("held run's stream rows %+v", rows)
	}
}

// html and the printed table show an order stage's orders beside its
// stock and its already_bought answers, and nothing of them for a run of no order stage.
func TestTheReportShowsOrders(t *testing.T) {
	o := inventory.OrderCounts{Counts: orders.Counts{Orders: 150, Units: 150, Buyers: 57}, DuplicateOrders: 93, Conflicts: 4}
	rep := &Report{Orders: "MariaDB at 127.0.0.1:3306", Stages: []StageRun{
		{StageID: StageID{Stage: "one-per-user-naive"}, Answers: Answers{Sales: 150, Busy: 5, AlreadyBought: 61}, Outcome: Outcome{Audit: Audit{Initial: 150, Orders: &o}}},
		{StageID: StageID{Stage: "atomic"}, Answers: Answers{Sales: 10}, Outcome: Outcome{Audit: Audit{Initial: 10}}},
	}}
	var html, table strings.Builder
	if err := rep.WriteHTML(&html); err != nil {
		t.Fatal(err)
	}
	if err := writeOrderTable(rep, &table); err != nil {
		t.Fatal(err)
	}
	section := html.String()
	if i := strings.Index(section, "<h2>Orders</h2>"); i >= 0 {
		section = section[i:]
		section = section[:strings.Index(section, "</table>")]
	}
	for _, out := range []string{section, table.String()} {
		if !strings.Contains(out, "MariaDB at 127.0.0.1:3306") || !strings.Contains(out, "one-per-user-naive") || !strings.Contains(out, "93") || strings.Contains(out, "atomic") {
			t.Errorf("orders of the naive rung missing, or atomic listed:\n%s", out)
		}
		if !strings.Contains(out, "already") || !strings.Contains(out, "bought") || !strings.Contains(out, "61") {
			t.Errorf("no already-bought column with the naive rung's 61:\n%s", out)
		}
	}
	rep.Stages = rep.Stages[1:]
	table.Reset()
	if err := writeOrderTable(rep, &table); err != nil || table.Len() != 0 {
		t.Errorf("a run without order stages printed %q (%v)", table.String(), err)
	}
}
