package loadgen

import "testing"

// TestTheReportSeesASaleCountedTwice: the fake shop's "twice" stage runs
// every fifth sale twice and answers it once, as a shop whose client
// library resent a sale's script after its reply was lost did (issue 24).
// Its audit balances (stock + sold = initial); the report must still call
// the run inconsistent, and the consistent check must fail.
func TestTheReportSeesASaleCountedTwice(t *testing.T) {
	fake := startFakeShop(t, 1)
	rep := fake.run(t, `
name: twice
defaults: {stock: 50, workers: 4, duration: 5s, until_sold_out: true}
runs:
  - stage: twice
    expect: [consistent]
  - stage: atomic
    expect: [consistent]
`)
	twice, atomic := rep.Stages[0], rep.Stages[1]
	if !twice.Audit.Consistent || twice.Audit.Sold <= twice.Sales || twice.Errors != 0 {
		t.Fatalf("twice: audit %+v after %d sales and %d errors; want a balanced audit counting more than the sales", twice.Audit, twice.Sales, twice.Errors)
	}
	if twice.Consistent || twice.Passed() {
		t.Errorf("twice: %d sold for %d sales answered 200, yet consistent %t, checks %+v", twice.Audit.Sold, twice.Sales, twice.Consistent, twice.Checks)
	}
	if !atomic.Consistent || !atomic.Passed() {
		t.Errorf("atomic: consistent %t, checks %+v", atomic.Consistent, atomic.Checks)
	}
}
