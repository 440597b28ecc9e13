package fault

import (
	"maps"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/lockstep/lockstep/internal/loadgen/report"
)

// TestAdmittedSalesAreToldApartByWhenTheyWereSent: a sale counts as
// admitted when it was answered 200 naming an order, and as admitted by the
// Redis that was killed when it was sent before the fault healed — even
// when its answer came after (a sale the old Redis admitted may be answered
// a moment after the step's clock says it was killed).
func TestAdmittedSalesAreToldApartByWhenTheyWereSent(t *testing.T) {
	heal := time.Now()
	sale := func(code int, sent time.Duration, took time.Duration, body string) vegeta.Result {
		return vegeta.Result{Code: uint16(code), Timestamp: heal.Add(sent), Latency: took, Body: []byte(body)}
	}
	st := &Step{healAt: heal, faultAt: heal.Add(-time.Second), results: []vegeta.Result{
		sale(200, -2*time.Second, time.Millisecond, `{"order":"early","user":"u1"}`),
		sale(200, -time.Second-time.Millisecond, 5*time.Millisecond, `{"order":"at-the-kill","user":"u2"}`), // answered after the kill
		sale(200, time.Millisecond, time.Millisecond, `{"order":"after","user":"u3"}`),
		sale(503, -500*time.Millisecond, time.Millisecond, `{"error":"redis_unavailable"}`),
		sale(409, 10*time.Millisecond, time.Millisecond, `{"error":"already_bought"}`),
		sale(200, 20*time.Millisecond, time.Millisecond, `not an answer`),
	}}
	want := map[string]admittedSale{"early": {"u1", true}, "at-the-kill": {"u2", true}, "after": {"u3", false}}
	if got := admitted(st); !maps.Equal(got, want) {
		t.Errorf("admitted %v, want %v", got, want)
	}
}

// A sale without an order counts as lost, before the heal or after it,
// except after the heal by a buyer who has an order: drawn again after a
// wipe, the order table refuses that buyer's second order by design. (A
// CI run's random buyers met one: "1 of 297 sent after it" failed
// loses-unread-orders.)
func TestSalesWithoutAnOrderLeaveOutABuyerWithOne(t *testing.T) {
	admitted := map[string]admittedSale{
		"kept":      {"u1", true},
		"lost":      {"u2", true},
		"after":     {"u3", false},
		"rebought":  {"u1", false}, // u1's order of before is "kept"
		"lostAfter": {"u4", false},
	}
	rows := map[string]bool{"kept": true, "after": true}
	buyers := map[string]bool{"u1": true, "u3": true}
	var rep report.AsyncOutageReport
	countWithoutOrder(&rep, admitted, rows, buyers)
	want := report.AsyncOutageReport{Admitted: 4, AdmittedBeforeHeal: 2, WithoutOrder: 2, WithoutOrderBeforeHeal: 1}
	if rep != want {
		t.Errorf("counted %+v, want %+v", rep, want)
	}
}
