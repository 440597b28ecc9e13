package fault

import (
	"slices"
	"strings"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/attack"
	"github.com/lockstep/lockstep/internal/loadgen/report"
)

// halfWayMove is the reshard step's move of the slot of the SKU's busiest
// key, stopped half-way for the step's hold, as an interrupted
// redis-cli --cluster reshard leaves a slot: the stage's keys of that tag
// move first (in one MIGRATE, as redis-cli moves up to ten keys at once),
// then nothing moves for the hold — the slot MIGRATING on its master,
// IMPORTING on the target, the other keys of the slot (the other stages')
// still on the master — and then the rest move and the slot is handed
// over. Meanwhile a sale's keys that moved answer ASK on the master; a key
// that does not exist yet (a free lock's) is created on the target, and a
// script that declares keys of which some exist nowhere yet gets TRYAGAIN
// for as long as the slot stays split. A correct stage sells on
// throughout: the longest gap between sales is measured (gap-at-most).
func halfWayMove(st *Step, key string) slotPlan {
	prefix := key[:strings.LastIndex(key, "}:")+2] // the stage's keys of the tag
	hold := st.run.Fault.Hold.D()
	return slotPlan{
		move:  SlotMove{First: prefix, Stop: hold, Pace: 100 * time.Millisecond},
		label: "slot migration stops half-way",
		moved: func(from, to string) {
			st.note("the keys %s* moved from %s to %s, the slot stayed migrating for %v, then moved whole in %.0f ms",
				prefix, from, to, hold, report.MS(st.healAt.Sub(st.faultAt)))
			gap := longestGap(st)
			st.rep.LongestGapMS = &gap
		},
	}
}

// longestGap is the longest time in milliseconds between two sales'
// answers, from the fault to its end.
func longestGap(st *Step) float64 {
	st.mu.Lock()
	ends := []time.Time{st.faultAt, st.healAt}
	for _, res := range st.results {
		if end := res.End(); attack.Classify(res.Code) == attack.Sale && end.After(st.faultAt) && end.Before(st.healAt) {
			ends = append(ends, end)
		}
	}
	st.mu.Unlock()
	slices.SortFunc(ends, time.Time.Compare)
	var longest time.Duration
	for i := 1; i < len(ends); i++ {
		longest = max(longest, ends[i].Sub(ends[i-1]))
	}
	return report.MS(longest)
}
