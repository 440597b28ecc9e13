package plan

import (
	"strings"
	"testing"
)

// `fault:` and `faults:` differ by a letter: a knob under the wrong one
// says where it goes, not only that the type lacks it.
func TestAFaultUnderTheWrongKeySaysWhereItGoes(t *testing.T) {
	for _, tc := range []struct {
		name, scenario string
		says           []string
	}{
		{"a shop knob under fault:", "runs:\n  - stage: atomic\n    fault: {work: 2ms}\n",
			[]string{"field work not found", "`faults:` (with an s)"}},
		{"a step under faults:", "runs:\n  - stage: watchdog\n    faults: {kind: crash}\n",
			[]string{"field kind not found", "`fault:` (no s)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.scenario), Shop{}, nil)
			if err == nil {
				t.Fatal("parsed")
			}
			for _, s := range tc.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error does not say %q:\n%v", s, err)
				}
			}
		})
	}
	if _, err := Parse([]byte("runs:\n  - stage: atomic\n    faults: {wrok: 2ms}\n"), Shop{}, nil); err == nil || strings.Contains(err.Error(), "goes under") {
		t.Errorf("a misspelt knob: %v, want yaml's error alone", err)
	}
}
