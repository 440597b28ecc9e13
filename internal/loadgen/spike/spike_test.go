package spike

import (
	"net/http"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/attack"
	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// TestRecordCountsEachKindAndTheFrontDoor: units and requests by kind of
// buyer, the limiter's refusals and the mark's answers kept from the
// requests that reached Redis (a limit-redis refusal reaches it), and
// those sent after the first sold-out answer.
func TestRecordCountsEachKindAndTheFrontDoor(t *testing.T) {
	const deduct = "http://shop/api/stages/atomic/deduct?sku=sku-1&qty=1&user="
	start := time.Unix(1000, 0)
	at := func(ms int) time.Time { return start.Add(time.Duration(ms) * time.Millisecond) }
	answers := []struct {
		user string
		code uint16
		body string
		sent time.Time
	}{
		{"honest-0", http.StatusOK, "", at(0)},
		{"bot-0", http.StatusOK, "", at(1)},
		{"bot-0", http.StatusTooManyRequests, `{"error":"rate_limited"}`, at(2)},
		{"honest-0", http.StatusConflict, `{"error":"sold_out","message":"inventory: sold out"}`, at(10)},
		{"bot-1", http.StatusConflict, `{"error":"sold_out","message":"inventory: sold out (the sold-out mark: no Redis round trip)"}`, at(20)},
		{"honest-1", http.StatusConflict, `{"error":"sold_out","message":"inventory: sold out"}`, at(30)},
	}
	for _, tc := range []struct {
		limiter                    string
		reachedRedis, afterSoldOut int
	}{
		{"limit-local", 4, 1},
		{"limit-redis", 5, 1},
	} {
		o := New(tc.limiter)
		tally := attack.NewTally(start, 0)
		for _, a := range answers {
			res := &vegeta.Result{URL: deduct + a.user, Code: a.code, Body: []byte(a.body), Timestamp: a.sent, Latency: time.Millisecond}
			tally.Add(res)
			o.Observe(attack.Result{Result: res, Outcome: attack.OutcomeOf(res), SoFar: tally})
		}
		s := o.Record()
		if s.HonestBuyers != 2 || s.Bots != 2 || s.HonestRequests != 3 || s.BotRequests != 3 || s.HonestUnits != 1 || s.BotUnits != 1 || s.BotsAdmitted != 2 {
			t.Errorf("%s: kinds %+v", tc.limiter, s)
		}
		if s.RateLimited != 1 || s.MarkAnswers != 1 || s.ReachedRedis != tc.reachedRedis || s.ReachedRedisAfterSoldOut != tc.afterSoldOut {
			t.Errorf("%s: front door %+v, want %d reaching Redis, %d after the sell-out", tc.limiter, s, tc.reachedRedis, tc.afterSoldOut)
		}
		if s.SoldOutMS != 11 || s.RedisPerUnit != float64(tc.reachedRedis)/2 || s.HonestP99MS != 1 {
			t.Errorf("%s: sold out at %v ms, %v per unit, honest p99 %v", tc.limiter, s.SoldOutMS, s.RedisPerUnit, s.HonestP99MS)
		}
	}
}
