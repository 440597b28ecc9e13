package main

import (
	"net/http"
	"testing"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// Answers are told apart by their error code: an error whose stock
// write's reply was lost may have sold, so the audit may count it; a
// retry of its key is answered as unsettled, not as sold out or busy.
func TestCountsTellWritesOfUnknownOutcome(t *testing.T) {
	var c counts
	for _, r := range []vegeta.Result{
		{Code: http.StatusOK},
		{Code: http.StatusOK, Headers: http.Header{"Idempotent-Replayed": {"true"}}},
		{Code: http.StatusLocked},
		{Code: http.StatusServiceUnavailable, Body: []byte(`{"error":"redis_unavailable","message":"idempotency: claim key: inventory: redis unavailable: i/o timeout"}`)},
		{Code: http.StatusServiceUnavailable, Body: []byte(`{"error":"may_have_sold","message":"inventory: commit sale: inventory: redis unavailable: inventory: outcome of the stock write unknown: i/o timeout"}`)},
		{Code: http.StatusLocked, Body: []byte(`{"error":"key_in_progress","message":"a request with this Idempotency-Key is still in progress"}`)},
		{Code: http.StatusConflict, Body: []byte(`{"error":"outcome_unknown","message":"the first request with this Idempotency-Key never recorded its outcome"}`)},
		{Code: http.StatusConflict, Body: []byte(`{"error":"sold_out","message":"inventory: sold out"}`)},
		{Code: http.StatusBadGateway, Body: []byte(`<html>502 Bad Gateway</html>`)},
	} {
		c.add(&r)
	}
	want := counts{Requests: 9, Sales: 1, Replays: 1, SoldOut: 1, Busy: 1, Errors: 3, Unknown: 1, Unsettled: 2}
	if c != want || c.unanswered() != 7 {
		t.Errorf("counts %+v (unanswered %d), want %+v (7)", c, c.unanswered(), want)
	}
}
