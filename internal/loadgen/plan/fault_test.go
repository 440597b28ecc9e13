package plan

import (
	"strings"
	"testing"
	"time"
)

func TestAnOrdersDownStepNeedsItsDurations(t *testing.T) {
	for _, tc := range []struct {
		step FaultStep
		ok   bool
	}{
		{FaultStep{Kind: FaultOrdersDown, Before: Duration(time.Second), Hold: Duration(6 * time.Second), Observe: Duration(8 * time.Second), Workers: 1}, true},
		{FaultStep{Kind: FaultOrdersDown, Before: Duration(time.Second), Hold: Duration(6 * time.Second), Observe: Duration(6 * time.Second), Workers: 1}, false},
		{FaultStep{Kind: FaultOrdersDown, Hold: Duration(6 * time.Second), Observe: Duration(8 * time.Second), Workers: 1}, false},
	} {
		if err := tc.step.validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: %v, want ok %v", tc.step, err, tc.ok)
		}
	}
}

// A fault knob written under fault: (the fault step) for faults: says so.
func TestAFaultKnobUnderFaultNamesFaults(t *testing.T) {
	_, err := Parse([]byte("runs:\n  - stage: naive\n    fault:\n      work: 2ms\n"), nil)
	if err == nil || !strings.Contains(err.Error(), `"work" is a fault knob, which goes under faults:`) {
		t.Fatalf("err = %v, want one naming faults:", err)
	}
}
