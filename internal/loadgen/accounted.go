package loadgen

import (
	"github.com/lockstep/lockstep/internal/loadgen/report"
)

// judgeConsistency sets the row's Consistent once its answers and its
// audit are both in: the audit balances (stock + sold = initial) and counts
// no more units sold than the load generator's own answers allow.
//
// Each request asks for one unit: a 200 sold it, a refusal (409, 423) sold
// nothing, an error (a 5xx, a lost connection, a timeout) may have sold it.
// So the audit may count at most sales + errors. A sale that ran twice and
// was answered once (a client library resending a script whose reply was
// lost, issue 24) takes both units from the stock, so the audit still
// balances; only this count sees it.
func judgeConsistency(row *report.StageRun) {
	row.Consistent = row.Audit.Consistent && row.Audit.Sold <= row.Sales+row.Errors
}
