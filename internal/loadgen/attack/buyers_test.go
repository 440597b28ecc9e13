package attack

import (
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/lockstep/lockstep/internal/loadgen/plan"
	"time"
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
		want Outcome
	}{
		{`{"error":"already_bought","message":"…"}`, AlreadyBought},
		{`{"error":"sold_out","message":"…"}`, SoldOut},
	} {
		if got := OutcomeOf(&vegeta.Result{Code: 409, Body: []byte(tc.body)}); got != tc.want {
			t.Errorf("409 %s: outcome %d, want %d", tc.body, got, tc.want)
		}
	}
	tl := NewTally(time.Time{}, 0)
	for _, r := range []vegeta.Result{
		{Code: 200}, {Code: 423}, {Code: 409, Body: []byte(`{"error":"sold_out"}`)},
		{Code: 409, Body: []byte(`{"error":"already_bought"}`)}, {Code: 409, Body: []byte(`{"error":"already_bought"}`)},
	} {
		tl.Add(&r)
	}
	row := tl.Answers()
	if row.Requests != 5 || row.Sales != 1 || row.Busy != 1 || row.SoldOut != 1 || row.AlreadyBought != 2 {
		t.Errorf("counted %d requests: %d sales, %d busy, %d sold out, %d already bought; want 5: 1, 1, 1, 2",
			row.Requests, row.Sales, row.Busy, row.SoldOut, row.AlreadyBought)
	}
}

// A spike's population: about Share of the targets are the bots', in
// turn; every honest buyer sends one request, or two back to back.
func TestBotsAndHonestBuyers(t *testing.T) {
	next := botTargeter("http://shop/api/stages/x/deduct?sku=sku-1&qty=1", plan.Bots{Count: 4, Share: 0.4, Twice: 0.5}, rand.New(rand.NewPCG(1, 2)))
	const n = 10_000
	bots, honest := map[string]int{}, map[string]int{}
	last := ""
	for range n {
		var target vegeta.Target
		if err := next(&target); err != nil {
			t.Fatal(err)
		}
		user := userOf(t, target)
		switch {
		case strings.HasPrefix(user, plan.BotPrefix):
			bots[user]++
		case strings.HasPrefix(user, plan.HonestPrefix):
			if honest[user] > 0 && user != last {
				t.Fatalf("%s's second request is not right after its first", user)
			}
			honest[user]++
			last = user
		default:
			t.Fatalf("buyer %q is neither a bot nor honest", user)
		}
	}
	botRequests := 0
	for _, c := range bots {
		botRequests += c
	}
	if len(bots) != 4 || botRequests < 0.37*n || botRequests > 0.43*n {
		t.Errorf("%d bots sent %d of %d requests, want 4 sending about 40%%", len(bots), botRequests, n)
	}
	twice := 0
	for user, c := range honest {
		if c > 2 {
			t.Fatalf("%s sent %d requests", user, c)
		}
		if c == 2 {
			twice++
		}
	}
	if share := float64(twice) / float64(len(honest)); share < 0.4 || share > 0.6 {
		t.Errorf("%.2f of the honest buyers sent twice, want about 0.5", share)
	}
}
