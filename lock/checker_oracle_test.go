package lock

import (
	"strings"
	"testing"
	"time"
)

// TestCheckerOracle runs the checker's oracle (ckCheck) on made-up records:
// what it must report, and what it must let pass.
func TestCheckerOracle(t *testing.T) {
	ms := func(n int) int64 { return ckDur(time.Duration(n) * time.Millisecond) }
	const base = int64(1e12) // ckNow is never 0
	hold := func(owner string, start, end, unlockAt int) ckRecord {
		r := ckRecord{Kind: "hold", Lock: "ck-mutex-a", Owner: owner, Start: base + ms(start), End: base + ms(end), Watchdog: true, Cause: "released"}
		if unlockAt > 0 {
			r.UnlockAt, r.LiveAtUnlock = base+ms(unlockAt), true
		} else {
			r.Cause = "lost"
		}
		return r
	}
	fenced := func(owner string, start, token int) ckRecord {
		r := hold(owner, start, start+100, start+90)
		r.Lock, r.Called, r.Token = "ck-fenced", base+ms(start-10), int64(token)
		return r
	}
	wait := func(owner string, start, end int) ckRecord {
		return ckRecord{Kind: "wait", Lock: "ck-mutex-a", Owner: owner, Start: base + ms(start), End: base + ms(end), Cause: "true"}
	}
	wipe := []ckEvent{{At: base + ms(2000), Ready: base + ms(2000)}}
	late := ckRecord{Kind: "late", Lock: "ck-mutex-a", Start: base + ms(1700), End: base + ms(2200)}
	for _, tc := range []struct {
		name    string
		records []ckRecord
		events  []ckEvent
		want    string // in a violation; "" for none
	}{
		{"a second owner 300 ms before the first calls Unlock",
			[]ckRecord{hold("a", 0, 1010, 1000), hold("b", 700, 2000, 1900)}, nil, "two live held contexts"},
		{"a second owner right after the first called Unlock",
			[]ckRecord{hold("a", 0, 1010, 1000), hold("b", 1001, 2000, 1900)}, nil, ""},
		{"a second owner before a lost hold's end was seen, within the lag",
			[]ckRecord{hold("a", 0, 1000, 0), hold("b", 700, 2000, 1900)}, nil, ""},
		{"a second owner long before a lost hold's end was seen",
			[]ckRecord{hold("a", 0, 1000, 0), hold("b", 500, 2000, 1900)}, nil, "two live held contexts"},
		{"fencing tokens that grow", []ckRecord{fenced("a", 0, 5), fenced("b", 200, 9)}, nil, ""},
		{"a fencing token that goes back", []ckRecord{fenced("a", 0, 5), fenced("b", 200, 5)}, nil, "the token went back"},
		{"a fencing token that goes back across a wipe",
			[]ckRecord{fenced("a", 0, 5), fenced("b", 200, 1)}, []ckEvent{{At: base + ms(150), Ready: base + ms(150)}}, "the token went back"},
		{"a waiter after a wipe, the lock free for 5 s",
			[]ckRecord{hold("a", 0, 1010, 1000), wait("w", 3000, 8100)}, wipe, "the lock was free"},
		{"a waiter after a wipe behind a late request that crossed it (CI's seed 8274353997463696853)",
			[]ckRecord{hold("a", 0, 1010, 1000), wait("w", 3000, 8100), late}, wipe, ""},
		{"a waiter behind a late request that landed before the wipe",
			[]ckRecord{hold("a", 0, 1010, 1000), wait("w", 3000, 8100), {Kind: "late", Lock: "ck-mutex-a", Start: base + ms(1200), End: base + ms(1600)}}, wipe, "the lock was free"},
		{"a waiter behind a late request of another lock",
			[]ckRecord{hold("a", 0, 1010, 1000), wait("w", 3000, 8100), {Kind: "late", Lock: "ck-mutex-b", Start: late.Start, End: late.End}}, wipe, "the lock was free"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			violations, _ := ckCheck(tc.records, tc.events)
			got := strings.Join(violations, "\n")
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Fatalf("violations:\n%s\nwant: %q", got, tc.want)
			}
		})
	}
}
