package main

import (
	"os"
	"strings"
	"testing"
)

func TestParseMutants(t *testing.T) {
	list := `# a comment

== a: deletes a line
file x.lua
-    redis.call('del', KEYS[1])
+

== b: two lines for one
file y.go
-	if x {
-		return
+	return
`
	mutants, err := parseMutants(strings.NewReader(list))
	if err != nil {
		t.Fatal(err)
	}
	if len(mutants) != 2 {
		t.Fatalf("%d mutants, want 2", len(mutants))
	}
	a, b := mutants[0], mutants[1]
	if a.id != "a" || a.file != "x.lua" || a.original != "    redis.call('del', KEYS[1])" || a.replacement != "" {
		t.Errorf("a = %+v", a)
	}
	if b.original != "\tif x {\n\t\treturn" || b.replacement != "\treturn" {
		t.Errorf("b = %+v", b)
	}
	got, err := b.apply("func f() {\n\tif x {\n\t\treturn\n\t}\n}")
	if err != nil || got != "func f() {\n\treturn\n\t}\n}" {
		t.Errorf("apply = %q, %v", got, err)
	}
}

func TestParseMutantsRejects(t *testing.T) {
	for name, list := range map[string]string{
		"no file":        "== a: x\n-old\n+new\n",
		"no original":    "== a: x\nfile f\n+new\n",
		"no change":      "== a: x\nfile f\n-same\n+same\n",
		"listed twice":   "== a: x\nfile f\n-old\n\n== a: y\nfile f\n-old\n",
		"no description": "== a\nfile f\n-old\n",
		"stray line":     "file f\n",
	} {
		if _, err := parseMutants(strings.NewReader(list)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

func TestApplyNeedsExactlyOneMatch(t *testing.T) {
	m := mutant{id: "m", file: "f", original: "x", replacement: "y"}
	if _, err := m.apply("none here"); err == nil {
		t.Error("applied to a text without its original")
	}
	if _, err := m.apply("x and x"); err == nil {
		t.Error("applied to a text with its original twice")
	}
}

// The checked-in list applies to the code as it is: a change to a script
// or guard that a mutant names fails here, in every go test run, instead
// of the next `make mutate`.
func TestTheListAppliesToTheCurrentCode(t *testing.T) {
	f, err := os.Open("../../lock/mutants.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mutants, err := parseMutants(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkApply("../..", mutants); err != nil {
		t.Fatal(err)
	}
}

// A kill stands only when the failing test fails again alone; a timeout is
// never a kill.
func TestConfirm(t *testing.T) {
	for _, tc := range []struct {
		name, first, again, want, wantRun string
	}{
		{"failed again", "killed", "killed", "killed", "^TestX$"},
		{"passed the second time", "killed", "survived", "flaky", "^TestX$"},
		{"timed out the second time", "killed", "timeout", "flaky", "^TestX$"},
		{"a timeout", "timeout", "", "timeout", ""},
		{"a survivor", "survived", "", "survived", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var runs []string
			got := confirm(result{outcome: tc.first, by: "by TestX/sub", test: "TestX"}, func(run string) result {
				runs = append(runs, run)
				return result{outcome: tc.again}
			})
			if got.outcome != tc.want {
				t.Errorf("outcome %s, want %s", got.outcome, tc.want)
			}
			if tc.wantRun == "" && len(runs) > 0 || tc.wantRun != "" && (len(runs) != 1 || runs[0] != tc.wantRun) {
				t.Errorf("re-runs %q, want %q", runs, tc.wantRun)
			}
		})
	}
}

// A kill the flaky test first reported does not hide the test that kills:
// an unconfirmed kill gets one more trial.
func TestJudgeTriesAgainAfterAnUnconfirmedKill(t *testing.T) {
	answers := []result{
		{outcome: "killed", test: "TestFlake"}, // a flake stops the first run
		{outcome: "survived"},                  // and passes alone
		{outcome: "killed", test: "TestKill"},  // the second trial
		{outcome: "killed", test: "TestKill"},  // confirmed
	}
	var runs []string
	got := judge(config{}, func(run string) result {
		runs = append(runs, run)
		res := answers[0]
		answers = answers[1:]
		return res
	})
	if got.outcome != "killed" || got.test != "TestKill" {
		t.Errorf("judged %+v after runs %q, want killed by TestKill", got, runs)
	}
}
