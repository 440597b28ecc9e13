package lock

import (
	"testing"

	classify "github.com/lockstep/lockstep/internal/outcome"
	"github.com/lockstep/lockstep/internal/outcome/outcometest"
)

// TestReplyLostAgreesWithTheProjectsTable: lock's own "may it have run?"
// answers as internal/outcome does for every go-redis error of its table,
// each made by a real Redis (through a proxy where the reply is lost).
func TestReplyLostAgreesWithTheProjectsTable(t *testing.T) {
	for _, c := range outcometest.Redis(t) {
		if got, want := replyLost(c.Err), c.Want == classify.MayHaveRun; got != want {
			t.Errorf("%s: replyLost(%v) = %v, but the table says %v", c.Name, c.Err, got, c.Want)
		}
		if got := classify.Of(c.Err); got != c.Want {
			t.Errorf("%s: outcome.Of(%v) = %v, want %v", c.Name, c.Err, got, c.Want)
		}
	}
}
