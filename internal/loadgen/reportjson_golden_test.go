package loadgen

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/report"
)

// These goldens pin report.json's schema, which readers outside this module
// (dashboards, CI scripts, older reports read back with ReadReport) rely
// on: every field name, its nesting and its encoding. Regenerate them with
// -update only for a change of schema that is meant, and say so in docs.
var updateGolden = flag.Bool("update", false, "rewrite the report.json goldens")

// TestReportJSONSchemaGolden fills every field of a Report, at every depth
// (the order, async, payment, crash and fault records included), with a
// value derived from the field's JSON path alone, and compares the encoding
// byte for byte: a renamed, moved, retyped or dropped field fails it, and so
// does a reordered one. Reading the golden back and writing it again must
// give the same bytes, so the decoding side is pinned too.
func TestReportJSONSchemaGolden(t *testing.T) {
	var rep report.Report
	fillEveryField(reflect.ValueOf(&rep).Elem(), "report")
	got, err := json.MarshalIndent(&rep, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	compareGolden(t, filepath.Join("testdata", "report_schema.golden.json"), got)

	back, err := report.ReadReport(filepath.Join("testdata", "report_schema.golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := json.MarshalIndent(back, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(append(again, '\n'), got) {
		t.Errorf("report_schema.golden.json read back and written again differs:\n%s", again)
	}
}

// TestReportJSONFakeShopGolden runs a representative scenario on the fake
// shop (a racy and an atomic stage with expectations, a one-replica row, a
// crash step that leaves its stage stuck, an unavailable stage, a paced
// row) and compares report.json's shape, every JSON path with the kind of
// its value, with the golden: what Run fills, not only what the types
// allow. Values vary from run to run; which fields are there does not.
func TestReportJSONFakeShopGolden(t *testing.T) {
	rep := startFakeShop(t, 2).run(t, `
name: golden
defaults: {stock: 40, workers: 8, duration: 2s, until_sold_out: true}
runs:
  - stage: racy
    faults: {work: 1ms, track_holders: true}
    expect: [oversells]
  - stage: atomic
    via: one-replica
    expect: [no-oversell, consistent]
  - stage: stuck
    crash: {observe: 200ms, rate: 100}
    expect: [stuck-after-crash, sells-after-reset]
  - stage: absent
  - stage: atomic
    label: paced
    rate: 200
    duration: 300ms
    until_sold_out: false
    stock: 1000
`)
	dir := t.TempDir()
	if err := rep.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	var lines []string
	jsonShape(doc, "", &lines)
	compareGolden(t, filepath.Join("testdata", "report_fakeshop.golden.txt"), []byte(strings.Join(lines, "\n")+"\n"))
}

func compareGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *updateGolden {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from what the report now writes; report.json must stay unchanged.\ngot:\n%s", path, got)
	}
}

// jsonShape lists the paths of doc with the JSON kind of each value; an
// array's elements are listed once per distinct shape, under path[].
func jsonShape(doc any, path string, lines *[]string) {
	switch v := doc.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		*lines = append(*lines, path+": object")
		for _, k := range keys {
			jsonShape(v[k], path+"."+k, lines)
		}
	case []any:
		*lines = append(*lines, path+": array")
		seen := map[string]bool{}
		for i, e := range v {
			var sub []string
			elem := path + "[]"
			if path == ".stages" || path == ".params.scenario.runs" {
				elem = fmt.Sprintf("%s[%d]", path, i)
			}
			jsonShape(e, elem, &sub)
			// Rows are listed each; other arrays' lengths vary by run.
			if key := strings.Join(sub, "\n"); !seen[key] || path == ".stages" || path == ".params.scenario.runs" {
				seen[key] = true
				*lines = append(*lines, sub...)
			}
		}
	case string:
		*lines = append(*lines, path+": string")
	case float64:
		*lines = append(*lines, path+": number")
	case bool:
		*lines = append(*lines, path+": bool")
	case nil:
		*lines = append(*lines, path+": null")
	}
}

// fillEveryField sets v and everything under it to a value that depends on
// path only: strings to the path's last name, numbers to a hash of the
// path, bools to true, one element in each slice and map, every pointer
// allocated.
func fillEveryField(v reflect.Value, path string) {
	h := fnv.New32a()
	h.Write([]byte(path))
	n := h.Sum32()%997 + 1
	if v.Type() == reflect.TypeOf(json.RawMessage{}) {
		v.SetBytes(fmt.Appendf(nil, "%q", path))
		return
	}
	if v.Type() == reflect.TypeOf(time.Time{}) {
		v.Set(reflect.ValueOf(time.Date(2026, 11, 28, 4, 0, 0, int(n)*1000, time.UTC)))
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			switch {
			case name == "" && f.Anonymous: // its fields are promoted: same JSON paths
				fillEveryField(v.Field(i), path)
			case name == "":
				fillEveryField(v.Field(i), path+"."+f.Name)
			default:
				fillEveryField(v.Field(i), path+"."+name)
			}
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillEveryField(v.Elem(), path)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fillEveryField(v.Index(0), path+"[0]")
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		key := reflect.New(v.Type().Key()).Elem()
		fillEveryField(key, path+".key")
		val := reflect.New(v.Type().Elem()).Elem()
		fillEveryField(val, path+".value")
		m.SetMapIndex(key, val)
		v.Set(m)
	case reflect.String:
		v.SetString(path[strings.LastIndexAny(path, ".]")+1:])
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(n))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(n))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(n) + 0.25)
	}
}
