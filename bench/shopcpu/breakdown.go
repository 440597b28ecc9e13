package main

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// part is one row of the profile breakdown: the samples whose stack has a
// frame matching focus and none matching the rows above it, so every
// sample counts once, in the first row that claims it.
type part struct{ name, focus string }

var parts = []part{
	{"idempotency check (httpapi's idempotency, its Redis calls included)", `httpapi\.\(\*idempotency\)|httpapi\.\(\*releaser\)`},
	{"metrics (internal/metrics, client_golang)", `lockstep/internal/metrics|prometheus/client_golang`},
	{"JSON answer (the sale's body, gin's Data/JSON)", `appendJSON|gin\.\(\*Context\)\.(Data|JSON|Render)|gin/render`},
	{"lock (lock/, the watchdog's included)", `lockstep/lockstep/lock\.`},
	{"Redis client (go-redis, internal/redisbatch, their system calls)", `go-redis|internal/redisbatch`},
	{"rest of the shop's code (httpapi, inventory, ...)", `lockstep/lockstep/`},
	{"gin (routing, context, middleware)", `gin-gonic/gin`},
	{"net/http server (read the request, write the answer)", `net/http\.`},
}

var pprofShown = regexp.MustCompile(`Showing nodes accounting for [^,]+, ([\d.]+)% of`)

// breakdown is each part's share of a profile's samples, then the rest
// (the scheduler, the garbage collector, the network poller).
func breakdown(ctx context.Context, bin, profile string) ([]float64, error) {
	shares := make([]float64, 0, len(parts)+1)
	var above []string
	total := 0.0
	for _, p := range parts {
		args := []string{"tool", "pprof", "-top", "-nodefraction", "0", "-nodecount", "1000000", "-focus", p.focus}
		if len(above) > 0 {
			args = append(args, "-ignore", strings.Join(above, "|"))
		}
		out, err := exec.CommandContext(ctx, "go", append(args, bin, profile)...).CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("go tool pprof -focus %s: %w\n%s", p.focus, err, out)
		}
		share := 0.0 // "Focus expression matched no samples"
		if m := pprofShown.FindStringSubmatch(string(out)); m != nil {
			share, _ = strconv.ParseFloat(m[1], 64)
		}
		shares = append(shares, share)
		total += share
		above = append(above, p.focus)
	}
	return append(shares, max(0, 100-total)), nil
}

// printBreakdown prints the shares as µs of shop CPU per 200 answer, one
// column per workload.
func printBreakdown(ws []*workload, shares map[string][]float64, perSale map[string]float64) {
	fmt.Print("\nShop CPU per 200 answer by part, µs (share of the profile × CPU per answer while it was taken)\n\n| part |")
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
