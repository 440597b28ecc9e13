package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/httpapi"
	"github.com/lockstep/lockstep/internal/shop"
)

// A query is taken exactly as written or refused: a pair that does not
// parse, a repeated parameter or one the route does not read is 400
// bad_request on every route that reads the query, and sells nothing —
// Go's own parser drops such a pair, and the sale went through with the
// default SKU or quantity.
func TestMalformedQueryIsRefused(t *testing.T) {
	ts := startShop(t, testToken)
	const stage = "atomic"
	for _, sku := range []string{"sku-1", "sku-2"} {
		ts.reset(t, stage, sku, 100)
	}
	for _, tc := range []struct{ method, route, query string }{
		{http.MethodPost, "deduct", "sku=sku-2;"},
		{http.MethodPost, "deduct", "qty=5;"},
		{http.MethodPost, "deduct", "qty=5%"},
		{http.MethodPost, "deduct", "qty=%zz"},
		{http.MethodPost, "deduct", "sku=sku-2;qty=2"},
		{http.MethodPost, "deduct", "sku=%zz&qty=2"},
		{http.MethodPost, "deduct", "qty=2&qty=2"},
		{http.MethodPost, "deduct", "sku=sku-2&sku=sku-2"},
		{http.MethodPost, "deduct", "sku=sku-2&colour=red"},
		{http.MethodPost, "deduct", "qty"},
		{http.MethodPost, "deduct", "sku=sku-2&"},
		{http.MethodPost, "deduct", "&sku=sku-2"},
		{http.MethodGet, "audit", "sku=sku-2;"},
		{http.MethodGet, "audit", "sku=sku-2&sku=sku-1"},
		{http.MethodGet, "audit", "qty=1"},
		{http.MethodPost, "trace", "wait=1s;"},
		{http.MethodPost, "trace", "wait=1s&wait=1s"},
		{http.MethodPost, "trace", "wait=%zz"},
		{http.MethodPost, "trace", "sku=sku-1"},
		{http.MethodPost, "reset", "sku=sku-2"},
		{http.MethodPut, "faults", "work=1s"},
	} {
		t.Run(tc.route+"?"+tc.query, func(t *testing.T) {
			before, digest := ts.audit(t, stage, "sku-1"), ts.digest(t)
			req := httptest.NewRequest(tc.method, "/api/stages/"+stage+"/"+tc.route+"?"+tc.query, strings.NewReader(`{"stock":1}`))
			req.Header.Set("Authorization", "Bearer "+testToken)
			req.Header.Set("Content-Type", "application/json")
			if tc.route == "faults" {
				req.Body = io.NopCloser(strings.NewReader(`{}`))
			}
			rec := ts.serve(req)
			body := checkShape(t, rec)
			if rec.Code != http.StatusBadRequest || errorCode(body) != httpapi.CodeBadRequest {
				t.Fatalf("%s %s?%s = %d %s, want 400 bad_request", tc.method, tc.route, tc.query, rec.Code, rec.Body)
			}
			if after := ts.audit(t, stage, "sku-1"); !reflect.DeepEqual(after, before) || ts.digest(t) != digest {
				t.Fatalf("a refused %s changed Redis (sku-1 audit %+v, was %+v)", tc.route, after, before)
			}
		})
	}
	t.Run("the list of stages takes no query", func(t *testing.T) {
		rec := ts.serve(httptest.NewRequest(http.MethodGet, "/api/stages?stage=atomic", nil))
		if checkShape(t, rec); rec.Code != http.StatusBadRequest {
			t.Fatalf("GET /api/stages?stage=atomic = %d %s, want 400", rec.Code, rec.Body)
		}
	})
	t.Run("a well-formed query still sells what it names", func(t *testing.T) {
		rec := ts.serve(httptest.NewRequest(http.MethodPost, "/api/stages/"+stage+"/deduct?sku=sku-2&qty=%2B3", nil))
		body := checkShape(t, rec)
		if rec.Code != http.StatusOK || body["sku"] != "sku-2" || body["qty"] != 3.0 {
			t.Fatalf("deduct?sku=sku-2&qty=%%2B3 = %d %s, want 3 units of sku-2 sold", rec.Code, rec.Body)
		}
		rec = ts.serve(httptest.NewRequest(http.MethodGet, "/api/stages/"+stage+"/audit?sku=sku-2", nil))
		if body := checkShape(t, rec); rec.Code != http.StatusOK || body["sku"] != "sku-2" || body["sold"] != 3.0 {
			t.Fatalf("audit?sku=sku-2 = %d %s", rec.Code, rec.Body)
		}
	})
}

// A sale's parameters may come as a JSON body (Content-Type
// application/json): it sells what the body says. Query and body that
// disagree, a body that is not one JSON object of sku and qty, and a body
// of any other type are refused and sell nothing — never ignored.
func TestSaleBody(t *testing.T) {
	ts := startShop(t, testToken)
	const stage = "atomic"
	for _, tc := range []struct {
		name, query, contentType, body string
		status                         int
		sku                            string
		qty                            int64
	}{
		{"quantity in the body", "", "application/json", `{"qty":5}`, http.StatusOK, "sku-1", 5},
		{"sku and quantity in the body", "", "application/json; charset=utf-8", `{"sku":"sku-2","qty":2}`, http.StatusOK, "sku-2", 2},
		{"query and body agree", "qty=4", "application/json", `{"qty":4}`, http.StatusOK, "sku-1", 4},
		{"query and body complete each other", "sku=sku-2", "application/json", `{"qty":3}`, http.StatusOK, "sku-2", 3},
		{"an empty JSON body", "qty=2", "application/json", ``, http.StatusOK, "sku-1", 2},
		{"query and body disagree on qty", "qty=3", "application/json", `{"qty":5}`, http.StatusBadRequest, "", 0},
		{"query and body disagree on sku", "sku=sku-1", "application/json", `{"sku":"sku-2"}`, http.StatusBadRequest, "", 0},
		{"quantity as a string", "", "application/json", `{"qty":"5"}`, http.StatusBadRequest, "", 0},
		{"quantity not whole", "", "application/json", `{"qty":1.5}`, http.StatusBadRequest, "", 0},
		{"quantity out of range", "", "application/json", `{"qty":101}`, http.StatusBadRequest, "", 0},
		{"unknown field", "", "application/json", `{"qty":5,"quantity":5}`, http.StatusBadRequest, "", 0},
		{"null", "", "application/json", `null`, http.StatusBadRequest, "", 0},
		{"two objects", "", "application/json", `{"qty":5}{"qty":6}`, http.StatusBadRequest, "", 0},
		{"curl -d's form type", "", "application/x-www-form-urlencoded", `{"qty":5}`, http.StatusUnsupportedMediaType, "", 0},
		{"a form", "", "application/x-www-form-urlencoded", `qty=5`, http.StatusUnsupportedMediaType, "", 0},
		{"no type", "", "", `{"qty":5}`, http.StatusUnsupportedMediaType, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, sku := range []string{"sku-1", "sku-2"} {
				ts.reset(t, stage, sku, 100)
			}
			req := httptest.NewRequest(http.MethodPost, "/api/stages/"+stage+"/deduct?"+tc.query, strings.NewReader(tc.body))
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			digest := ts.digest(t)
			rec := ts.serve(req)
			body := checkShape(t, rec)
			if rec.Code != tc.status {
				t.Fatalf("%q with body %q = %d %s, want %d", tc.query, tc.body, rec.Code, rec.Body, tc.status)
			}
			if tc.status != http.StatusOK {
				if ts.digest(t) != digest {
					t.Fatalf("a refused sale (%d) changed Redis", rec.Code)
				}
				return
			}
			if body["sku"] != tc.sku || body["qty"] != float64(tc.qty) {
				t.Fatalf("sold %v × %v, want %d × %s", body["qty"], body["sku"], tc.qty, tc.sku)
			}
			if a := ts.audit(t, stage, tc.sku); a.Sold != tc.qty {
				t.Fatalf("the audit of %s says %d sold, want %d", tc.sku, a.Sold, tc.qty)
			}
		})
	}
}

// A trace's wait is bounded by what the server can still answer: a wait
// the write timeout would cut is refused at once with the bound, and the
// longest accepted one gets its answer.
func TestTraceWaitWithinTheWriteTimeout(t *testing.T) {
	const requestTimeout = 300 * time.Millisecond
	ts := startShop(t, testToken, func(c *shop.Config) { c.RequestTimeout = requestTimeout })
	srv := httptest.NewUnstartedServer(ts.shop.Handler())
	srv.Config = httpapi.NewHTTPServer(ts.shop.Handler(), requestTimeout)
	srv.Start()
	defer srv.Close()
	trace := func(wait time.Duration) (int, string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/api/stages/atomic/trace?wait="+wait.String(), nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		return res.StatusCode, string(b), err
	}
	longest := srv.Config.WriteTimeout
	start := time.Now()
	status, body, err := trace(longest + time.Second)
	if err != nil || status != http.StatusBadRequest || !strings.Contains(body, requestTimeout.String()) {
		t.Fatalf("wait %s beyond the write timeout %s: %d %s (%v) after %s; want 400 naming the bound %s at once",
			longest+time.Second, longest, status, body, err, time.Since(start).Round(time.Millisecond), requestTimeout)
	}
	status, body, err = trace(requestTimeout)
	if err != nil || status != http.StatusServiceUnavailable || !strings.Contains(body, httpapi.CodeNothingTraced) {
		t.Fatalf("the longest wait (%s) with no sale: %d %s (%v), want 503 nothing_traced", requestTimeout, status, body, err)
	}
}

// A body that is JSON but of the wrong shape is not called malformed, and
// a range error says the range accepted.
func TestBodyErrorsNameWhatIsWrong(t *testing.T) {
	ts := startShop(t, testToken)
	for _, tc := range []struct{ body, want string }{
		{`{"stock":"5"}`, "invalid body: "},
		{`{"stock":1,"stok":2}`, "invalid body: "},
		{`[]`, "invalid body: "},
		{`{"stock":1}{"stock":2}`, "invalid body: "},
		{`{"stock":`, "malformed JSON body: "},
		{`{"stock":1,}`, "malformed JSON body: "},
		{`{"stock":1,"segments":-1}`, "segments must be within [0, 1024]"},
	} {
		req := httptest.NewRequest(http.MethodPost, "/api/stages/atomic/reset", strings.NewReader(tc.body))
		req.Header.Set("Authorization", "Bearer "+testToken)
		rec := ts.serve(req)
		body := checkShape(t, rec)
		if message, _ := body["message"].(string); rec.Code != http.StatusBadRequest || !strings.Contains(message, tc.want) {
			t.Errorf("reset %s = %d %s, want 400 saying %q", tc.body, rec.Code, rec.Body, tc.want)
		}
	}
}

// An Idempotency-Key covers the sale as its query and body together ask
// it: the same sale asked the other way is a replay, another one is the
// key reused.
func TestIdempotencyKeyCoversTheBody(t *testing.T) {
	ts := startShop(t, testToken)
	const stage = "atomic"
	ts.reset(t, stage, "sku-1", 100)
	sale := func(query, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/api/stages/"+stage+"/deduct?"+query, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Idempotency-Key", "order-7")
		return ts.serve(req)
	}
	first := sale("", `{"qty":2}`)
	if first.Code != http.StatusOK {
		t.Fatalf("first sale: %d %s", first.Code, first.Body)
	}
	again := sale("qty=2", "")
	if again.Code != http.StatusOK || again.Header().Get("Idempotent-Replayed") != "true" || again.Body.String() != first.Body.String() {
		t.Fatalf("the same sale by query: %d %s (replayed %q), want the first answer replayed", again.Code, again.Body, again.Header().Get("Idempotent-Replayed"))
	}
	if other := sale("", `{"qty":3}`); other.Code != http.StatusBadRequest {
		t.Fatalf("another sale with the key: %d %s, want 400", other.Code, other.Body)
	}
	if a := ts.audit(t, stage, "sku-1"); a.Sold != 2 {
		t.Fatalf("sold %d, want 2 (once)", a.Sold)
	}
}
