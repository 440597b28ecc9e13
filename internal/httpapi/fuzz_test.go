package httpapi_test

// Fuzz targets of the shop's request parsing, each against a real shop on
// its own redis-server. The seed corpus (testdata/fuzz/) runs with every
// `go test`; `make fuzz-short` fuzzes each target for a few seconds, and by
// hand, e.g.
//
//	go test -run '^$' -fuzz '^FuzzDeduct$' -fuzztime 10m ./internal/httpapi/
//
// (one target per run; a failing input lands in testdata/fuzz/<target>/ and
// then runs as a regression seed).

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/httpapi"
	"github.com/lockstep/lockstep/inventory"
)

// The contract's argument rules, written out independently of the shop's
// validators.
var (
	validSKU = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)
	validKey = regexp.MustCompile(`^[\x21-\x7e]{1,255}$`)
)

// saleOracle says what POST deduct?rawQuery asks for: sku (default sku-1)
// and qty (default 1, a base-10 integer in 1..100), and whether the query
// is valid. The query is taken strictly: it is "&"-separated name=value
// pairs, each percent-decoding and free of ";", naming sku or qty, each at
// most once; anything else makes the whole query invalid.
func saleOracle(rawQuery string) (sku string, qty int64, valid bool) {
	sku, qty = inventory.DefaultSKU, 1
	if rawQuery == "" {
		return sku, qty, true
	}
	given := map[string]string{}
	for _, pair := range strings.Split(rawQuery, "&") {
		rawName, rawValue, ok := strings.Cut(pair, "=")
		name, nameErr := url.QueryUnescape(rawName)
		value, valueErr := url.QueryUnescape(rawValue)
		_, repeated := given[name]
		if !ok || strings.Contains(pair, ";") || nameErr != nil || valueErr != nil || repeated || (name != "sku" && name != "qty") {
			return sku, qty, false
		}
		given[name] = value
	}
	valid = true
	if v, ok := given["sku"]; ok {
		sku = v
	}
	if v, ok := given["qty"]; ok {
		n, err := strconv.ParseInt(v, 10, 64)
		qty, valid = n, err == nil && n >= 1 && n <= 100
	}
	return sku, qty, valid && validSKU.MatchString(sku)
}

// FuzzDeduct: POST /api/stages/{stage}/deduct?{query} with any stage and
// query. A valid sale on an available stage sells exactly qty units (200,
// echoing sku and qty) or none (409 sold_out); an unknown stage is 404, an
// unavailable one 503, a malformed query (saleOracle) or an invalid sku
// or qty 400 bad_request; anything that does not sell leaves the audit
// unchanged, and a 400 or 404 leaves Redis untouched.
func FuzzDeduct(f *testing.F) {
	for _, stage := range []string{"naive", "synchronized", "setnx", "setnx-expire", "uuid-lua", "watchdog", "segmented", "atomic", "fenced", "redlock", "mysql", "etcd", "nope", ""} {
		f.Add(stage, "")
	}
	for _, q := range []string{"sku=sku-1&qty=3", "qty=100", "qty=101", "qty=0", "qty=-1", "qty=+7", "qty=007", "qty=1.5", "qty=", "qty=99999999999999999999",
		"sku=", "sku=%7Bsku-1%7D", "sku=a:b", "sku=" + strings.Repeat("x", 65), "sku=a;qty=2", "sku=%zz&qty=2", "qty=2&qty=500", "sku=s.k_u-9&sku=bad!",
		"sku=sku-2;", "qty=5;", "qty=5%", "qty=%zz", "qty", "sku=sku-2&", "&qty=2", "s%6Bu=sku-2&qty=2", "sku=sku-2&colour=red", "qty=2&qty=2"} {
		f.Add("atomic", q)
	}
	ts := startShop(f, testToken)
	stages := stageIDs(ts)
	f.Fuzz(func(t *testing.T, stage, rawQuery string) {
		req := httptest.NewRequest(http.MethodPost, "/", nil)
		req.URL.Path = "/api/stages/" + stage + "/deduct"
		req.URL.RawQuery = rawQuery
		sku, qty, valid := saleOracle(rawQuery)
		available, known := stages[stage]
		var before inventory.Audit
		if known && available && validSKU.MatchString(sku) {
			before = ts.audit(t, stage, sku)
		}
		digest := ts.digest(t)

		rec := ts.serve(req)
		body := checkShape(t, rec)
		routed := stage != "" && !strings.Contains(stage, "/")
		switch {
		case !routed:
			if rec.Code != http.StatusNotFound && rec.Code != http.StatusMethodNotAllowed {
				t.Fatalf("path %q = %d %s, want 404 or 405", req.URL.Path, rec.Code, rec.Body)
			}
		case !known:
			if rec.Code != http.StatusNotFound || errorCode(body) != "unknown_stage" {
				t.Fatalf("unknown stage %q = %d %s", stage, rec.Code, rec.Body)
			}
		case !available:
			if rec.Code != http.StatusServiceUnavailable || errorCode(body) != "stage_unavailable" {
				t.Fatalf("unavailable stage %q = %d %s", stage, rec.Code, rec.Body)
			}
		case !valid:
			if rec.Code != http.StatusBadRequest {
				t.Fatalf("invalid query %q (sku %q qty %d) = %d %s, want 400", rawQuery, sku, qty, rec.Code, rec.Body)
			}
		case rec.Code == http.StatusOK:
			want := map[string]any{"stage": stage, "sku": sku, "qty": float64(qty), "replica": "r0"}
			for k, v := range want {
				if body[k] != v {
					t.Fatalf("sale of %q: %s = %v, want %v (body %s)", rawQuery, k, body[k], v, rec.Body)
				}
			}
			after := ts.audit(t, stage, sku)
			if after.Sold != before.Sold+qty || after.Stock != before.Stock-qty || !after.Consistent {
				t.Fatalf("sale of %d %s on %s: audit %+v, was %+v", qty, sku, stage, after, before)
			}
			return
		case rec.Code == http.StatusConflict:
			if before.Stock >= qty {
				t.Fatalf("sold out with %d in stock for qty %d: %s", before.Stock, qty, rec.Body)
			}
		default:
			t.Fatalf("valid sale %q on %s = %d %s, want 200 or 409", rawQuery, stage, rec.Code, rec.Body)
		}
		if rec.Code != http.StatusConflict && ts.digest(t) != digest {
			t.Fatalf("%d answer to %q on %q changed Redis", rec.Code, rawQuery, stage)
		}
		if known && available && validSKU.MatchString(sku) {
			if after := ts.audit(t, stage, sku); !reflect.DeepEqual(after, before) {
				t.Fatalf("%d answer changed the audit: %+v, was %+v", rec.Code, after, before)
			}
		}
	})
}

// FuzzIdempotencyKey: a deduct with any Idempotency-Key header (and
// possibly a second one). A key that is not one header of 1-255 printable
// ASCII characters is 400 bad_request with Redis untouched; a valid key
// sells once, and every later request with it gets the first answer back,
// marked Idempotent-Replayed, without selling again.
func FuzzIdempotencyKey(f *testing.F) {
	for _, k := range []string{"order-1", "a", strings.Repeat("k", 255), strings.Repeat("k", 256), "", "a b", "tab\tkey", "ünïcode", "new\nline", "\x7f", "~!@#$%^&*()"} {
		f.Add(k, "")
	}
	f.Add("order-1", "order-2")
	ts := startShop(f, testToken)
	const stage, sku = "atomic", "idem"
	ts.reset(f, stage, sku, inventory.MaxStock)
	first := make(map[string][]byte) // the answer each key got first, in this process
	f.Fuzz(func(t *testing.T, key, second string) {
		req := httptest.NewRequest(http.MethodPost, "/api/stages/"+stage+"/deduct?sku="+sku, nil)
		req.Header["Idempotency-Key"] = []string{key}
		if second != "" {
			req.Header["Idempotency-Key"] = append(req.Header["Idempotency-Key"], second)
		}
		before, digest := ts.audit(t, stage, sku), ts.digest(t)

		rec := ts.serve(req)
		checkShape(t, rec)
		after := ts.audit(t, stage, sku)
		replayed := rec.Header().Get("Idempotent-Replayed") == "true"
		switch answer, seen := first[key]; {
		case second != "" || !validKey.MatchString(key):
			if rec.Code != http.StatusBadRequest || ts.digest(t) != digest {
				t.Fatalf("Idempotency-Key %q (second %q) = %d %s, want 400 with Redis untouched", key, second, rec.Code, rec.Body)
			}
		case seen:
			if !replayed || !bytes.Equal(rec.Body.Bytes(), answer) || !reflect.DeepEqual(after, before) {
				t.Fatalf("retry with %q = %d %s (replayed %t, audit %+v then %+v), want the first answer %s again and no sale",
					key, rec.Code, rec.Body, replayed, before, after, answer)
			}
		default:
			if rec.Code != http.StatusOK || replayed || after.Sold != before.Sold+1 {
				t.Fatalf("first use of %q = %d %s (replayed %t, audit %+v then %+v), want one sale", key, rec.Code, rec.Body, replayed, before, after)
			}
			first[key] = bytes.Clone(rec.Body.Bytes())
		}
	})
}

// resetOracle is the reset body as a lenient reader takes it.
type resetOracle struct {
	SKU      *string `json:"sku"`
	Stock    *int64  `json:"stock"`
	Segments int     `json:"segments"`
}

// FuzzResetBody: POST reset with any body. An accepted body is a JSON
// object whose stock is in range; the answer and the stored audit are that
// stock, unsold, on that SKU. Any rejection is 400 (413 over the size
// limit) and writes nothing.
func FuzzResetBody(f *testing.F) {
	for _, b := range []string{`{"stock":5}`, `{"sku":"sku-2","stock":0,"segments":4}`, `{"stock":1000000000}`, `{"stock":1000000001}`, `{"stock":-1}`,
		`{"stock":5.0}`, `{"stock":"5"}`, `{"stock":null}`, `null`, `[]`, `{}`, ``, ` {"stock":1} `, `{"stock":1}}`, `{"stock":1}{"stock":2}`,
		`{"stock":1,"stok":2}`, `{"STOCK":3}`, `{"stock":1,"stock":2}`, `{"sku":"{x}","stock":1}`, `{"stock":1,"segments":5000}`, `{"stock":1,"segments":-1}`} {
		f.Add(uint8(0), []byte(b))
		f.Add(uint8(6), []byte(b)) // segmented
	}
	ts := startShop(f, testToken)
	f.Fuzz(func(t *testing.T, pick uint8, raw []byte) {
		stage := adminStages[int(pick)%len(adminStages)]
		req := httptest.NewRequest(http.MethodPost, "/api/stages/"+stage+"/reset", bytes.NewReader(raw))
		req.Header.Set("Authorization", "Bearer "+testToken)
		digest := ts.digest(t)

		rec := ts.serve(req)
		body := checkShape(t, rec)
		if rec.Code != http.StatusOK {
			checkRejection(t, rec, raw, ts.digest(t) != digest)
			return
		}
		var want resetOracle
		if err := json.Unmarshal(raw, &want); err != nil || !isObject(raw) || want.Stock == nil || *want.Stock < 0 || *want.Stock > inventory.MaxStock {
			t.Fatalf("reset accepted %q (lenient decode: %+v, %v)", raw, want, err)
		}
		sku := inventory.DefaultSKU
		if want.SKU != nil {
			sku = *want.SKU
		}
		if body["sku"] != sku || body["stage"] != stage || body["initial"] != float64(*want.Stock) || body["stock"] != float64(*want.Stock) || body["sold"] != 0.0 {
			t.Fatalf("reset %q answered %s", raw, rec.Body)
		}
		if a := ts.audit(t, stage, sku); a.Initial != *want.Stock || a.Stock != *want.Stock || a.Sold != 0 || !a.Consistent {
			t.Fatalf("after reset %q the audit is %+v", raw, a)
		}
	})
}

// FuzzFaultsBody: PUT faults with any body. An accepted body is a JSON
// object; the faults answered are the ones the replica now runs, and
// putting the answer back is accepted and changes nothing (round trip).
// Any rejection is 400 (413 over the size limit) and writes nothing.
func FuzzFaultsBody(f *testing.F) {
	for _, b := range []string{`{}`, `{"work":"2ms","work_max":"5ms","slow_ratio":0.01,"slow":"300ms","lock_ttl":"200ms","crash_holding_lock":true}`,
		`{"work":"1m"}`, `{"work":"1m0.000000001s"}`, `{"work":"-1ms"}`, `{"work":"fast"}`, `{"work":"5ms","work_max":"2ms"}`, `{"slow_ratio":1.5}`,
		`{"slow_ratio":-0}`, `{"slow_ratio":1e400}`, `{"lock_ttl":"10us"}`, `{"wrok":"1ms"}`, `null`, `[]`, ``, `{"work":"1ms"}}`, `{"work":2}`,
		`{"crash_holding_lock":"yes"}`, `{"WORK":"3ms"}`} {
		f.Add(uint8(5), []byte(b)) // watchdog
		f.Add(uint8(7), []byte(b)) // atomic: holds no Redis lock
	}
	ts := startShop(f, testToken)
	f.Fuzz(func(t *testing.T, pick uint8, raw []byte) {
		stage := adminStages[int(pick)%len(adminStages)]
		put := func(b []byte) *httptest.ResponseRecorder {
			req := httptest.NewRequest(http.MethodPut, "/api/stages/"+stage+"/faults", bytes.NewReader(b))
			req.Header.Set("Authorization", "Bearer "+testToken)
			return ts.serve(req)
		}
		digest := ts.digest(t)
		rec := put(raw)
		checkShape(t, rec)
		if rec.Code != http.StatusOK {
			checkRejection(t, rec, raw, ts.digest(t) != digest)
			return
		}
		if !isObject(raw) {
			t.Fatalf("faults accepted %q, which is no JSON object", raw)
		}
		var answer struct {
			Stage  string          `json:"stage"`
			Faults json.RawMessage `json:"faults"`
		}
		var answered inventory.Faults
		if err := json.Unmarshal(rec.Body.Bytes(), &answer); err != nil || answer.Stage != stage || json.Unmarshal(answer.Faults, &answered) != nil {
			t.Fatalf("faults %q answered %s", raw, rec.Body)
		}
		// Eventually, not at once: the replica's follower may still apply
		// an earlier PUT it read from Redis before this one (a reload that
		// races a local set; it settles with this PUT's announcement).
		deadline := time.Now().Add(2 * time.Second)
		for {
			running, err := ts.shop.Inventory.Faults(stage)
			if err == nil && running == answered {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("faults %q: answered %+v, the replica runs %+v (%v)", raw, answered, running, err)
			}
			time.Sleep(time.Millisecond)
		}
		again := put(answer.Faults)
		if again.Code != http.StatusOK || !bytes.Equal(again.Body.Bytes(), rec.Body.Bytes()) {
			t.Fatalf("putting back the answer %s = %d %s", answer.Faults, again.Code, again.Body)
		}
	})
}

// checkRejection asserts a refused admin body: 413 exactly when it is over
// the limit, else 400, and nothing written.
func checkRejection(t *testing.T, rec *httptest.ResponseRecorder, raw []byte, wrote bool) {
	t.Helper()
	want := http.StatusBadRequest
	if len(raw) > httpapi.MaxBodyBytes {
		want = http.StatusRequestEntityTooLarge
	}
	if rec.Code != want || wrote {
		t.Fatalf("body %q = %d %s (wrote to Redis: %t), want %d with nothing written", raw, rec.Code, rec.Body, wrote, want)
	}
}

func isObject(raw []byte) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(raw, &m) == nil && m != nil
}

// adminStages are the stages the admin body targets pick from by index
// (redlock needs three Redis masters, which these shops do not have).
var adminStages = []string{"naive", "synchronized", "setnx", "setnx-expire", "uuid-lua", "watchdog", "segmented", "atomic", "fenced"}
