package fault

import (
	"context"
	"time"

	"github.com/lockstep/lockstep/internal/sleep"
)

// pauseFault: a sale on the first replica stops its process right before its
// stock write (pause_before_write), holding what it read; sales go on
// through the proxy; after hold, once another holder is inside, it is
// continued and writes what it read before the pause.
type pauseFault struct{}

func (pauseFault) Run(ctx context.Context, st *Step) error {
	fs := st.run.Fault
	armed := st.run.Faults
	armed.PauseBeforeWrite = true
	if err := st.resetWith(ctx, armed); err != nil {
		return err
	}
	victim := st.env.Names[0]
	answer := st.victim(ctx, victim)
	if _, err := st.waitStopped(ctx, answer); err != nil {
		return err
	}
	st.faultAt, st.rep.Victim = time.Now(), victim
	st.mark(st.faultAt, "SIGSTOP "+victim)
	st.note("%s stopped itself right before its stock write, holding what it had read (%s)", victim, st.lockState(ctx))
	// The sales go to the other replicas, for the whole window: the stopped
	// one would only pile up requests that all run at once when continued.
	loadDone := st.background(ctx, fs.Observe, st.env.SKU, namesBut(st.env.Names, victim)...)
	defer loadDone()
	if err := sleep.For(ctx, fs.Hold.D()); err != nil {
		return err
	}
	if st.waitOtherHolder(ctx, victim) {
		st.note("another holder was inside its critical section when %s was continued", victim)
	} else {
		st.note("no other holder was seen inside within %s of the end of the pause", secondHolderWait)
	}
	var err error
	if st.healAt, err = st.continueVictim(victim, answer); err != nil {
		return err
	}
	loadDone()
	return st.conclude(ctx)
}
