package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"time"
)

// part is one row of the profile breakdown: the samples whose stack has a
// frame matching focus and none matching except, and that no row above
// claimed, so every sample counts once, in the first row that claims it.
type part struct {
	name          string
	focus, except *regexp.Regexp
}

var parts = []part{
	// A keyed sale runs inside the key's check: the sale's own frames
	// (Server.sell and below) are left to the rows of what they do.
	{name: "idempotency check (httpapi's idempotency and releaser, not the sale they run)",
		focus: regexp.MustCompile(`httpapi\.\(\*idempotency\)|httpapi\.\(\*releaser\)`), except: regexp.MustCompile(`httpapi\.\(\*Server\)\.sell$`)},
	{name: "metrics (internal/metrics, client_golang)", focus: regexp.MustCompile(`lockstep/internal/metrics|prometheus/client_golang`)},
	{name: "JSON answer (the sale's body, writing the answer's header and body)", focus: regexp.MustCompile(`appendJSON|httpapi\.writeAnswer|gin\.\(\*Context\)\.(Data|JSON|Render)|gin/render`)},
	{name: "lock (lock/, the watchdog's included)", focus: regexp.MustCompile(`lockstep/lockstep/lock\.`)},
	{name: "Redis client (go-redis, internal/redisbatch: every command's round trip, the key's scripts' included)", focus: regexp.MustCompile(`go-redis|internal/redisbatch`)},
	{name: "rest of the shop's code (httpapi, inventory, ...)", focus: regexp.MustCompile(`lockstep/lockstep/`)},
	{name: "gin (routing, context, middleware)", focus: regexp.MustCompile(`gin-gonic/gin`)},
	{name: "net/http server (read the request, write the answer)", focus: regexp.MustCompile(`net/http\.`)},
}

// claim is the row of parts that claims a sample with these frames, or
// len(parts) for the rest.
func claim(frames []string) int {
	for i, p := range parts {
		if slices.ContainsFunc(frames, p.focus.MatchString) && (p.except == nil || !slices.ContainsFunc(frames, p.except.MatchString)) {
			return i
		}
	}
	return len(parts)
}

// breakdown is each part's share of a profile's samples, in %, then the
// rest's (the scheduler, the garbage collector, the network poller).
func breakdown(ctx context.Context, bin, profile string) ([]float64, error) {
	out, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-traces", bin, profile).Output()
	if err != nil {
		return nil, fmt.Errorf("go tool pprof -traces %s: %w", profile, err)
	}
	return sharesOf(string(out))
}

// sharesOf reads pprof -traces output: stacks between dashed lines, the
// first frame's line led by the stack's value.
func sharesOf(traces string) ([]float64, error) {
	sums := make([]time.Duration, len(parts)+1)
	var total time.Duration
	for _, block := range strings.Split(traces, "-----------+")[1:] {
		lines := strings.Split(strings.TrimSpace(block), "\n")
		if len(lines) < 2 {
			continue
		}
		first := strings.Fields(lines[1]) // lines[0] is the dashes' rest
		if len(first) < 2 {
			return nil, fmt.Errorf("pprof -traces: no value in %q", lines[1])
		}
		value, err := time.ParseDuration(first[0])
		if err != nil {
			return nil, fmt.Errorf("pprof -traces: value %q: %w", first[0], err)
		}
		frames := []string{strings.Join(first[1:], " ")}
		for _, l := range lines[2:] {
			frames = append(frames, strings.TrimSpace(l))
		}
		// pprof writes "(inline)" after a frame's name.
		for i, f := range frames {
			frames[i] = strings.TrimSuffix(f, " (inline)")
		}
		sums[claim(frames)] += value
		total += value
	}
	if total == 0 {
		return nil, errors.New("pprof -traces: no samples")
	}
	shares := make([]float64, len(sums))
	for i, d := range sums {
		shares[i] = 100 * float64(d) / float64(total)
	}
	return shares, nil
}

// printBreakdown prints the shares as µs of shop CPU per 200 answer, one
// column per workload.
func printBreakdown(ws []*workload, shares map[string][]float64, perSale map[string]float64) {
	// A row is where the samples' stacks are, not what caused them: a
	// command's round trip runs on the Redis client's sender goroutine, and
	// the wake-ups it costs in the runtime's rows.
	fmt.Print("\nShop CPU per 200 answer by part, µs (share of the profile × CPU per answer while it was taken; by where the stacks are:\n" +
		"the Redis client's row holds every command's round trip, the key's scripts' too; what the key costs in all is atomic-keyed − atomic above)\n\n| part |")
	for _, w := range ws {
		fmt.Printf(" %s |", w.name)
	}
	fmt.Print("\n| --- |")
	for range ws {
		fmt.Print(" ---: |")
	}
	fmt.Println()
	for i := range len(parts) + 1 {
		name := "runtime and the rest (scheduler, GC, network poller)"
		if i < len(parts) {
			name = parts[i].name
		}
		fmt.Printf("| %s |", name)
		for _, w := range ws {
			fmt.Printf(" %.1f |", shares[w.name][i]/100*perSale[w.name])
		}
		fmt.Println()
	}
	fmt.Print("| **all** |")
	for _, w := range ws {
		fmt.Printf(" **%.1f** |", perSale[w.name])
	}
	fmt.Println()
}
