package loadgen

import (
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/lockstep/lockstep/internal/loadgen/plan"
	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/inventory"
	"github.com/lockstep/lockstep/orders"
)

// userOf is the buyer a target names.
func userOf(t *testing.T, target vegeta.Target) string {
	t.Helper()
	u, err := url.Parse(target.URL)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(target.URL, "http://shop/api/stages/x/deduct?sku=sku-1&qty=1&user=") {
		t.Fatalf("target %s", target.URL)
	}
	return u.Query().Get("user")
}

// Eager buyers send their requests back to back (the attack's free workers
// take them at once); the others one each, all from the population.
func TestBuyersAreDrawnFromThePopulationWithEagerBursts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		buyers plan.Buyers
		run    int // how many targets in a row name one buyer
	}{
		{"eager", plan.Buyers{Users: 1000, Eager: 1, Requests: 3}, 3},
		{"eager default burst", plan.Buyers{Users: 1000, Eager: 1}, plan.DefaultEagerRequests},
		{"calm", plan.Buyers{Users: 5}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next := buyerTargeter("http://shop/api/stages/x/deduct?sku=sku-1&qty=1", tc.buyers, rand.New(rand.NewPCG(1, 2)))
			seen := map[string]bool{}
			for burst := range 30 {
				var first string
				for i := range tc.run {
					var target vegeta.Target
					if err := next(&target); err != nil {
						t.Fatal(err)
					}
					user := userOf(t, target)
					if i == 0 {
						first = user
					} else if user != first {
						t.Fatalf("burst %d: request %d names %s, the burst's buyer is %s", burst, i, user, first)
					}
					seen[user] = true
				}
			}
			if len(seen) > tc.buyers.Users {
				t.Fatalf("%d buyers seen from a population of %d", len(seen), tc.buyers.Users)
			}
			if tc.run > 1 && len(seen) < 20 {
				t.Fatalf("30 eager bursts named only %d buyers: one burst per buyer draw expected", len(seen))
			}
		})
	}
}

// A 409 already_bought is a refusal of its own: not a sold out that ends
// the run, and not counted as busy.
func TestAnAlreadyBoughtAnswerIsARefusalNotSoldOut(t *testing.T) {
	for _, tc := range []struct {
		body string
		want outcome
	}{
		{`{"error":"already_bought","message":"…"}`, outcomeAlreadyBought},
		{`{"error":"sold_out","message":"…"}`, outcomeSoldOut},
	} {
		if got := outcomeOf(&vegeta.Result{Code: 409, Body: []byte(tc.body)}); got != tc.want {
			t.Errorf("409 %s: outcome %d, want %d", tc.body, got, tc.want)
		}
	}
	tl := &tally{replicas: map[string]struct{}{}, errorSamples: map[string]int{}}
	for _, r := range []vegeta.Result{
		{Code: 200}, {Code: 423}, {Code: 409, Body: []byte(`{"error":"sold_out"}`)},
		{Code: 409, Body: []byte(`{"error":"already_bought"}`)}, {Code: 409, Body: []byte(`{"error":"already_bought"}`)},
	} {
		tl.add(&r)
	}
	var row report.StageRun
	fillFromTally(&row, tl)
	if row.Requests != 5 || row.Sales != 1 || row.Busy != 1 || row.SoldOut != 1 || row.AlreadyBought != 2 {
		t.Errorf("counted %d requests: %d sales, %d busy, %d sold out, %d already bought; want 5: 1, 1, 1, 2",
			row.Requests, row.Sales, row.Busy, row.SoldOut, row.AlreadyBought)
	}
}

// crashed is a run whose crash step left undersold units.
func crashed(undersold int64) *report.StageRun {
	return &report.StageRun{CrashOutcome: report.CrashOutcome{Crash: &report.CrashReport{Triggered: true, Undersold: &undersold}}}
}

func TestOrderExpectations(t *testing.T) {
	run := func(initial, stock int, o inventory.OrderCounts) *report.StageRun {
		return &report.StageRun{Answers: report.Answers{Sales: 1}, Outcome: report.Outcome{Audit: report.Audit{Initial: initial, Stock: stock, Orders: &o}}}
	}
	dup := inventory.OrderCounts{Counts: orders.Counts{Orders: 10, Units: 10, Buyers: 7}, DuplicateOrders: 3}
	clean := inventory.OrderCounts{Counts: orders.Counts{Orders: 10, Units: 10, Buyers: 10}}
	refused := clean
	refused.Conflicts = 50
	lost := clean
	lost.Undersold = 1
	// A unit an async stage's sweeper cancelled, read before its return:
	// neither on sale nor live, but accounted for.
	returning := clean
	returning.Returning = 1
	for _, tc := range []struct {
		check string
		run   *report.StageRun
		want  bool
	}{
		{"duplicate-orders", run(10, 0, dup), true},
		{"duplicate-orders", run(10, 0, clean), false},
		{"no-duplicate-orders", run(10, 0, clean), true},
		{"undersells", run(100, 90, refused), true}, // stock left after conflicts: 少卖
		{"undersells", run(100, 90, clean), false},  // a run that ended early is no undersell
		{"undersells", run(11, 0, lost), true},      // a unit taken without an order
		{"no-undersell", run(10, 0, clean), true},
		{"orders-match-stock", run(10, 0, clean), true},
		{"orders-match-stock", run(11, 0, lost), false},
		{"orders-match-stock", run(11, 0, returning), true},
		{"no-undersell", run(11, 0, returning), true},
		{"no-duplicate-orders", &report.StageRun{Answers: report.Answers{Sales: 1}}, false}, // not an order stage
		{"undersold-after-crash", crashed(1), true},
		{"undersold-after-crash", crashed(0), false},
		{"no-undersold-after-crash", crashed(0), true},
		{"no-undersold-after-crash", &report.StageRun{CrashOutcome: report.CrashOutcome{Crash: &report.CrashReport{}}}, false}, // nothing crashed
	} {
		ok, detail := orderChecks[tc.check](tc.run, nil)
		if ok != tc.want {
			t.Errorf("%s on %+v: %v (%s), want %v", tc.check, tc.run.Audit, ok, detail, tc.want)
		}
	}
}
