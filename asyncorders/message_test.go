package asyncorders

import (
	"strings"
	"testing"
	"time"
)

func TestAMessageReadsBackAsItWasWritten(t *testing.T) {
	const id = "0123456789abcdef0123456789abcdef"
	for _, m := range []Message{
		{OrderID: id, SKU: "sku-1", User: "ann", Qty: 1, Replica: "r1"},
		{OrderID: id, SKU: "sku-1", User: "ann lee 李", Qty: maxQty, Replica: "host with spaces\nand a newline"},
		{OrderID: id, SKU: "sku-1", User: "bob", Qty: 3, Replica: ""},
	} {
		got, err := parse(m.SKU, "1764150000123-7", map[string]any{orderField: m.encode()})
		if err != nil {
			t.Fatalf("%+v: %v", m, err)
		}
		m.Admitted = time.UnixMilli(1764150000123)
		if got != m {
			t.Errorf("read %+v, wrote %+v", got, m)
		}
	}
}

func TestAMalformedEntrySaysWhatIsWrong(t *testing.T) {
	const id = "0123456789abcdef0123456789abcdef"
	for _, c := range []struct {
		name   string
		entry  string
		values map[string]any
		want   []string
	}{
		{"the fields of another format", "1-1", map[string]any{"id": id, "user": "ann", "qty": "1"}, []string{`field "order" missing`}},
		{"nothing in it", "1-1", map[string]any{orderField: ""}, []string{`id "" is not 32 hex digits`, `qty ""`, "user must not be empty", "no newline"}},
		{"bad id and qty", "1-1", map[string]any{orderField: "nope -1 ann\nr1"}, []string{`id "nope" is not 32 hex digits`, `qty "-1"`}},
		{"too many units", "1-1", map[string]any{orderField: id + " 1048577 ann\nr1"}, []string{`qty "1048577"`}},
		{"a control character in the user", "1-1", map[string]any{orderField: id + " 1 a\tb\nr1"}, []string{"user must be printable"}},
		{"a long replica", "1-1", map[string]any{orderField: id + " 1 ann\n" + strings.Repeat("r", maxReplica+1)}, []string{"replica longer than"}},
		{"an entry id written by hand", "x", map[string]any{orderField: id + " 1 ann\nr1"}, []string{`entry id "x"`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parse("sku-1", c.entry, c.values)
			if err == nil {
				t.Fatal("parsed")
			}
			for _, want := range c.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%q does not say %q", err, want)
				}
			}
		})
	}
}
