// Command mutate measures how many small defects the lock library's tests
// catch: it applies each mutant of a list (mutants.go) alone to a copy of
// the module, runs the package's tests, and reports the mutants the tests
// killed, those that survived, and the score. A kill is confirmed: the test
// that failed is run again, alone, and must fail again (a mutant whose test
// passes then is reported flaky, not killed). A run cut by its timeout is
// reported apart, not as a kill.
// The working tree is never touched: the copy is made from the files git
// knows (tracked or not ignored) in a temporary directory.
//
//	go run ./internal/mutate                          # every mutant (make mutate)
//	go run ./internal/mutate -check                   # only: every original text is found
//	go run ./internal/mutate -run 'release|renew'     # the mutants whose id matches
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/lockstep/lockstep/internal/flagenv"
)

func main() {
	if err := run(); err != nil {
		slog.Error("mutate", "err", err)
		os.Exit(1)
	}
}

type config struct {
	list, pkg, runIDs, testArgs, first string
	timeout                            time.Duration
	parallel                           int
	check                              bool
}

func run() error {
	var cfg config
	fs := flag.NewFlagSet("mutate", flag.ExitOnError)
	fs.StringVar(&cfg.list, "list", "lock/mutants.txt", "the mutant list")
	fs.StringVar(&cfg.pkg, "pkg", "./lock/", "the package whose tests must kill the mutants")
	fs.StringVar(&cfg.runIDs, "run", "", "only the mutants whose id matches this regexp")
	fs.StringVar(&cfg.testArgs, "testargs", "", "more go test arguments, space separated")
	fs.DurationVar(&cfg.timeout, "timeout", 5*time.Minute, "a mutant's test run is cut (and the mutant reported timed out) after this")
	fs.StringVar(&cfg.first, "first", "^(TestScript|TestRetried|TestUnlockBeforeTheSubscriptionIsNotMissed$)", "tests run first, alone (-run): the quick deterministic ones (and one whose mutant would otherwise stretch the full run past its timeout with slow failures); a mutant they kill needs no full run")
	fs.IntVar(&cfg.parallel, "parallel", 1, "mutants tested at once, each in a copy of the module of its own")
	fs.BoolVar(&cfg.check, "check", false, "only check that every mutant applies to the current code")
	if err := flagenv.Parse(fs, os.Args[1:], os.Getenv); err != nil {
		return err
	}

	f, err := os.Open(cfg.list)
	if err != nil {
		return err
	}
	mutants, err := parseMutants(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", cfg.list, err)
	}
	if cfg.runIDs != "" {
		re, err := regexp.Compile(cfg.runIDs)
		if err != nil {
			return fmt.Errorf("-run: %w", err)
		}
		var chosen []mutant
		for _, m := range mutants {
			if re.MatchString(m.id) {
				chosen = append(chosen, m)
			}
		}
		mutants = chosen
	}
	if err := checkApply(".", mutants); err != nil {
		return err
	}
	if cfg.check {
		fmt.Printf("%d mutants, each applies to the current code\n", len(mutants))
		return nil
	}

	// One copy of the module per worker: a mutant is applied to its
	// worker's copy and undone before the next.
	dirs := make([]string, max(cfg.parallel, 1))
	for i := range dirs {
		dir, err := os.MkdirTemp("", "mutate-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		if err := copyModule(".", dir); err != nil {
			return err
		}
		dirs[i] = dir
	}
	start := time.Now()
	fmt.Printf("baseline: %s on the unmutated copy\n", cfg.pkg)
	// Twice at most: a test that fails now and then on a loaded machine
	// must not cost the whole run.
	if res := testOnce(dirs[0], cfg, ""); res.outcome != "survived" {
		fmt.Printf("baseline %s, again:\n%s\n", res.outcome, res.tail)
		if res := testOnce(dirs[0], cfg, ""); res.outcome != "survived" {
			return fmt.Errorf("the unmutated tests do not pass (%s):\n%s", res.outcome, res.tail)
		}
	}
	results := make([]result, len(mutants))
	errs := make([]error, len(mutants))
	next := make(chan int)
	var mu sync.Mutex
	done := 0
	var wg sync.WaitGroup
	for _, dir := range dirs {
		wg.Go(func() {
			for i := range next {
				results[i], errs[i] = runMutant(dir, cfg, mutants[i])
				mu.Lock()
				done++
				m, res := mutants[i], results[i]
				fmt.Printf("[%2d/%d] %-6s %-9s %6.1fs  %s  %s\n", done, len(mutants), m.id, res.outcome, res.took.Seconds(), m.what, res.by)
				mu.Unlock()
			}
		})
	}
	for i := range mutants {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	killed, unkilled, invalid := 0, map[string][]mutant{}, []string{}
	for i, m := range mutants {
		switch res := results[i]; res.outcome {
		case "killed":
			killed++
		case "survived", "flaky", "timeout":
			unkilled[res.outcome] = append(unkilled[res.outcome], m)
		default:
			invalid = append(invalid, m.id+" ("+res.outcome+"):\n"+res.tail)
		}
	}
	total := killed + len(unkilled["survived"]) + len(unkilled["flaky"]) + len(unkilled["timeout"])
	fmt.Printf("\nscore: %d of %d mutants killed (%.1f %%), %d flaky, %d timed out, %d survived, in %v\n", killed, total,
		100*float64(killed)/float64(max(total, 1)), len(unkilled["flaky"]), len(unkilled["timeout"]), len(unkilled["survived"]), time.Since(start).Round(time.Second))
	for _, outcome := range []string{"flaky", "timeout", "survived"} {
		for _, m := range unkilled[outcome] {
			fmt.Printf("%s: %s (%s:%d) %s\n", outcome, m.id, m.file, m.line, m.what)
		}
	}
	if len(invalid) > 0 {
		return fmt.Errorf("mutants that do not build:\n%s", strings.Join(invalid, "\n"))
	}
	return nil
}

// checkApply reports every mutant whose original text is not found exactly
// once in the tree at root.
func checkApply(root string, mutants []mutant) error {
	var errs []error
	for _, m := range mutants {
		src, err := os.ReadFile(filepath.Join(root, m.file))
		if err != nil {
			errs = append(errs, fmt.Errorf("mutant %s: %w", m.id, err))
			continue
		}
		if _, err := m.apply(string(src)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// copyModule copies the files git knows in root (tracked, or untracked and
// not ignored) to dir.
func copyModule(root, dir string) error {
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		return fmt.Errorf("git ls-files: %w", err)
	}
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		src := filepath.Join(root, name)
		info, err := os.Lstat(src)
		if err != nil || !info.Mode().IsRegular() {
			continue // deleted in the working tree, or a link
		}
		data, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(dst, data, info.Mode().Perm()); err != nil {
			return err
		}
	}
	return nil
}

type result struct {
	outcome string // killed, flaky, timeout, survived, build failed
	by      string // the first failing test
	test    string // its top-level test, to run again
	took    time.Duration
	tail    string
}

// runMutant applies m to the copy in dir, runs the tests and restores the file.
func runMutant(dir string, cfg config, m mutant) (result, error) {
	path := filepath.Join(dir, m.file)
	src, err := os.ReadFile(path)
	if err != nil {
		return result{}, err
	}
	mutated, err := m.apply(string(src))
	if err != nil {
		return result{}, err
	}
	if err := os.WriteFile(path, []byte(mutated), 0o644); err != nil {
		return result{}, err
	}
	defer os.WriteFile(path, src, 0o644) //nolint:errcheck // checked by the next mutant's apply
	start := time.Now()
	res := judge(cfg, func(run string) result { return testOnce(dir, cfg, run) })
	res.took = time.Since(start)
	return res, nil
}

// judge tries the mutant, and once more when the kill was not confirmed:
// the first failure may be a test that flakes under load, which -failfast
// let stop the run before the test that kills it.
func judge(cfg config, test func(run string) result) result {
	res := trial(cfg, test)
	if res.outcome == "flaky" {
		res = trial(cfg, test)
	}
	return res
}

// trial runs the first tests, then, if they pass, all of them, and
// confirms a kill (test(run) runs those matching run; "" all).
func trial(cfg config, test func(run string) result) result {
	res := result{outcome: "survived"}
	if cfg.first != "" {
		res = test(cfg.first)
	}
	if res.outcome == "survived" {
		res = test("")
	}
	return confirm(res, test)
}

// confirm runs the test that killed a mutant again, alone (rerun(run)):
// the kill stands if it fails again; if it passes the mutant is flaky.
// Without a failing test's name the whole run is repeated.
func confirm(res result, rerun func(run string) result) result {
	if res.outcome != "killed" {
		return res
	}
	run := ""
	if res.test != "" {
		run = "^" + regexp.QuoteMeta(res.test) + "$"
	}
	switch again := rerun(run); again.outcome {
	case "killed":
		res.by += ", again"
	case "timeout":
		res.outcome, res.by = "flaky", res.by+", then timed out"
	default:
		res.outcome, res.by = "flaky", res.by+", then passed"
	}
	return res
}

var failingTest = regexp.MustCompile(`--- FAIL: (\S+)`)

// testOnce runs the package's tests, or only those matching run.
func testOnce(dir string, cfg config, run string) result {
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout+time.Minute)
	defer cancel()
	args := []string{"test", "-count=1", "-failfast", "-timeout", cfg.timeout.String()}
	args = append(args, strings.Fields(cfg.testArgs)...)
	if run != "" {
		args = append(args, "-run", run)
	}
	args = append(args, cfg.pkg)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CI=true") // a missing server fails, never skips
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	res := result{took: time.Since(start), tail: tail(out.String(), 30)}
	text := out.String()
	switch {
	case err == nil:
		res.outcome = "survived"
	case strings.Contains(text, "[build failed]") || strings.Contains(text, "[setup failed]"):
		res.outcome = "build failed"
	case strings.Contains(text, "panic: test timed out") || ctx.Err() != nil:
		res.outcome = "timeout"
	default:
		res.outcome = "killed"
	}
	if m := failingTest.FindStringSubmatch(text); m != nil {
		res.by, res.test = "by "+m[1], strings.SplitN(m[1], "/", 2)[0]
	}
	return res
}

func tail(s string, lines int) string {
	parts := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}
