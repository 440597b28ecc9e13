package loadgen

import (
	"errors"

	"github.com/lockstep/lockstep/internal/flagenv"
	"github.com/lockstep/lockstep/internal/loadgen/report"
)

// ExitStatus is the exit status of a command that ran a scenario and ended
// with err: flagenv.ExitInterrupted when interrupted, ExitExpectationsNotMet,
// flagenv.ExitUsage for a scenario naming a stage the shop does not have,
// else flagenv.ExitStatus's.
func ExitStatus(err error, interrupted bool) int {
	switch {
	case interrupted:
		return flagenv.ExitInterrupted
	case errors.Is(err, report.ErrExpectationsNotMet):
		return report.ExitExpectationsNotMet
	case errors.Is(err, ErrUnknownStage):
		return flagenv.ExitUsage
	}
	return flagenv.ExitStatus(err)
}
