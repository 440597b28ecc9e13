package main

import (
	"fmt"
	"time"
)

func printHeader(cfg config) {
	fmt.Printf("| lock | uncontended p50 | p99 | server requests / pair | one key acq/s | server CPU ms / 1000 acq | %d keys acq/s | server RSS MB | overlaps | errors "+
		"| fault lease | after the holder's kill -9 | holders, holder frozen past its lease | holders, leader or master killed | no lock served after the kill |\n", cfg.keys)
	fmt.Println("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|---|---|---|")
}

func printRow(w row) {
	fmt.Printf("| %s | %s | %s | %.1f | %.0f | %.1f | %.0f | %.0f | %d | %d | %s | %s | %s | %s | %s |\n",
		w.name, round(w.unc.p50), round(w.unc.p99), w.unc.requestsPerPair, w.one.perSec, w.one.cpuPerThousand, w.many.perSec,
		float64(w.rss)/(1<<20), w.one.overlaps+w.many.overlaps, w.one.errors+w.many.errors,
		leaseCell(w.faultLease), w.crash.cell(), w.pause.cell(), w.failover.holdersCell(), w.failover.stallCell())
}

func round(d time.Duration) string { return d.Round(10 * time.Microsecond).String() }

func seconds(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

func leaseCell(d time.Duration) string {
	if d == 0 {
		return "none"
	}
	return d.String()
}

// failure is what an acquisition that failed otherwise than by being
// kept out saw, for a cell.
func failure(ev event) string {
	if ev.Probe == nil {
		return ev.Err
	}
	return ev.Probe.String()
}

func (c crashed) cell() string {
	switch {
	case c.failed != "":
		return "none acquired, attempts failed: " + c.failed
	case !c.stuck:
		return "acquired after " + seconds(c.recovered)
	case c.kept:
		return "**stuck**: none acquired, its record still there"
	}
	return "none acquired, no record left"
}

func (p paused) cell() string {
	switch {
	case p.failed != "":
		return fmt.Sprintf("%d (the other not in, attempts failed: %s)", p.holders, p.failed)
	case p.otherOut:
		return fmt.Sprintf("%d (the other kept out for the whole bound)", p.holders)
	}
	return fmt.Sprintf("%d (the other in after %s)", p.holders, seconds(p.otherIn))
}

func (f failedOver) holdersCell() string {
	switch {
	case f.none != "":
		return "- (" + f.none + ")"
	case f.failed != "":
		return fmt.Sprintf("%d (the other not in, attempts failed: %s)", f.holders, f.failed)
	case f.otherOut:
		return fmt.Sprintf("%d (the other kept out for the whole bound)", f.holders)
	}
	return fmt.Sprintf("%d (the other in)", f.holders)
}

func (f failedOver) stallCell() string {
	switch {
	case f.none != "":
		return "-"
	case !f.elects:
		return "- (replica promoted by the bench at once)"
	}
	cell := fmt.Sprintf("%s (a leader after %s", seconds(f.stalled), seconds(f.elected))
	if a := f.attempts; a.Failed+a.TimedOut > 0 {
		cell += "; attempts before: " + a.String()
	}
	return cell + ")"
}
