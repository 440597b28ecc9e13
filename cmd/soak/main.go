// Command soak holds the local workshop under a steady load for a long
// time and checks that nothing accumulates. It starts `workshop --keep`
// (real redis-server, the shop replicas, nginx when installed; no lock
// servers, which segmented does not use), offers a steady rate of
// idempotent sales on the segmented stage through the proxy, samples
// every shop's memory and goroutines from its /metrics and Redis's keys,
// lock channels, clients and memory, then asserts that
//
//   - every sampled series stayed flat after the warm-up (see judgeFlat),
//   - no lock key or lock channel is left once the load stops,
//   - all but at most 0.1 % of the requests sold or replayed a sale, and
//     none was refused as sold out (the stock is twice the offer),
//   - every idempotency key has a TTL, none is pending but an errored
//     request's (whose outcome is unknown), and all are gone once their
//     TTL has passed,
//   - the audit balances, oversold is 0, and the units sold are exactly
//     the first answers of 200 (retries with a used key sold nothing),
//     plus at most the errored writes whose reply was lost.
//
// It is not part of CI (its test runs the short mode):
//
//	go run ./cmd/soak                        # 10 minutes at 200 sales/s
//	go run ./cmd/soak --duration 1m --idempotency-ttl 5s --sample 1s   # a short look
//
// It prints a table of the samples and writes OUT/soak.json, keeps the
// workshop's log in OUT/workshop.log and the shops' in OUT/shops/; it exits
// 1 when a check fails.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/lockstep/lockstep/internal/flagenv"
	"github.com/lockstep/lockstep/internal/redisclient"
	"github.com/lockstep/lockstep/inventory"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	// 0 after --help or a soak whose checks passed, 2 on a usage error, 1
	// for any other failure.
	if status := flagenv.ExitStatus(err); status != 0 {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(status)
	}
}

type options struct {
	duration, sample, warmup, idempotencyTTL time.Duration
	rate, workers, replicas, segments        int
	retryRatio                               float64
	faults, out, workshopBin, shopBin        string
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.DurationVar(&o.duration, "duration", 10*time.Minute, "how long the load runs")
	fs.IntVar(&o.rate, "rate", 200, "sales offered per second")
	fs.DurationVar(&o.sample, "sample", 5*time.Second, "sampling interval")
	fs.DurationVar(&o.warmup, "warmup", 0, "samples left out of the flatness checks; 0: a tenth of the duration, at least the idempotency TTL plus two samples (the key count's ramp)")
	fs.DurationVar(&o.idempotencyTTL, "idempotency-ttl", time.Minute, "the shops' idempotency TTL (LOCKSTEP_IDEMPOTENCY_TTL): the key count levels off at rate × TTL")
	fs.Float64Var(&o.retryRatio, "retry-ratio", 0.1, "share of requests that retry an Idempotency-Key sent at least a second earlier")
	fs.IntVar(&o.workers, "workers", 64, "most requests in flight")
	fs.IntVar(&o.replicas, "replicas", 3, "shop replicas")
	fs.IntVar(&o.segments, "segments", 16, "segments of the soak's SKU")
	fs.StringVar(&o.faults, "faults", `{"work":"2ms","slow_ratio":0.01,"slow":"300ms","lock_ttl":"200ms"}`,
		"the stage's fault knobs (the body of PUT faults): by default the workshop's scaled-down ones, so sales hold their lock, wait for it, and the watchdog renews it")
	fs.StringVar(&o.out, "out", "out/soak", "directory for soak.json, workshop.log, the shops' logs (shops/) and the workshop's own files")
	fs.StringVar(&o.workshopBin, "workshop-bin", "", "workshop binary; empty: go build ./cmd/workshop (and ./cmd/shop)")
	fs.StringVar(&o.shopBin, "shop-bin", "", "shop binary; empty: built with the workshop")
	if err := flagenv.ParseArgs(fs, args); err != nil {
		return o, err
	}
	if err := o.check(); err != nil {
		return o, flagenv.Usage(err)
	}
	if o.warmup == 0 {
		o.warmup = max(o.duration/10, o.idempotencyTTL+2*o.sample)
	}
	if o.warmup >= o.duration {
		return o, flagenv.Usage(fmt.Errorf("the warm-up (%v) leaves nothing of the %v to judge: raise --duration or lower --idempotency-ttl", o.warmup, o.duration))
	}
	return o, nil
}

// check refuses every value before the soak builds or starts anything.
func (o options) check() error {
	return errors.Join(
		flagenv.Check(o.duration > 0, "duration", "positive"),
		flagenv.Check(o.sample > 0, "sample", "positive"),
		flagenv.Check(o.idempotencyTTL > 0, "idempotency-ttl", "positive"),
		flagenv.Check(o.warmup >= 0, "warmup", "at least 0"),
		flagenv.Check(o.rate >= 1, "rate", "at least 1"),
		flagenv.Check(o.workers >= 1, "workers", "at least 1"),
		flagenv.Check(o.replicas >= 1, "replicas", "at least 1"),
		flagenv.Check(o.segments >= 1, "segments", "at least 1"),
		flagenv.Check(o.retryRatio >= 0 && o.retryRatio < 1, "retry-ratio", "within [0, 1)"),
		flagenv.Check(json.Valid([]byte(o.faults)) && strings.HasPrefix(strings.TrimSpace(o.faults), "{"), "faults", "a JSON object (the body of PUT faults)"),
		flagenv.Check(o.out != "", "out", "a directory"),
		flagenv.Check((o.workshopBin == "") == (o.shopBin == ""), "shop-bin", "goes with --workshop-bin"),
		checkBinary("workshop-bin", o.workshopBin),
		checkBinary("shop-bin", o.shopBin),
	)
}

// checkBinary refuses a binary flag that names no executable file; empty
// (build one) passes.
func checkBinary(flagName, path string) error {
	if path == "" {
		return nil
	}
	if st, err := os.Stat(path); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return fmt.Errorf("--%s %s: not an executable file", flagName, path)
	}
	return nil
}

// report is soak.json.
type report struct {
	Params      params           `json:"params"`
	Samples     []sample         `json:"samples"`
	Load        *loadResult      `json:"load"`
	Verdicts    []verdict        `json:"verdicts"`
	Audit       inventory.Audit  `json:"audit"`
	Idempotency idempotencyAudit `json:"idempotency_after_load"`
	Checks      []check          `json:"checks"`
	Passed      bool             `json:"passed"`
}

type params struct {
	Stage          string  `json:"stage"`
	Rate           int     `json:"rate"`
	DurationS      float64 `json:"duration_s"`
	SampleS        float64 `json:"sample_s"`
	WarmupS        float64 `json:"warmup_s"`
	IdempotencyTTL string  `json:"idempotency_ttl"`
	Faults         string  `json:"faults"`
	RetryRatio     float64 `json:"retry_ratio"`
	Replicas       int     `json:"replicas"`
	Segments       int     `json:"segments"`
	Stock          int64   `json:"stock"`
	Proxy          string  `json:"proxy"`
	Redis          string  `json:"redis"`
}

type check struct {
	Name   string `json:"name"`
	Passed bool   `json:"passed"`
	Detail string `json:"detail"`
}

const sku = "soak"

func run(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	say := func(format string, a ...any) { fmt.Fprintf(stderr, "soak: "+format+"\n", a...) }
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "lockstep-soak-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if o.workshopBin == "" {
		say("building the workshop and the shop")
		if o.workshopBin, o.shopBin, err = buildBinaries(ctx, tmp); err != nil {
			return err
		}
	}
	say("starting the workshop (log: %s)", filepath.Join(o.out, "workshop.log"))
	ws, err := startWorkshop(ctx, o, o.workshopBin, o.shopBin, tmp)
	if err != nil {
		return err
	}
	defer func() {
		if err := ws.keepShopLogs(filepath.Join(o.out, "shops")); err != nil {
			say("keeping the shops' logs: %v", err)
		}
		say("stopping the workshop")
		ws.stop()
	}()
	st := ws.state
	say("up: %s proxy at %s, %d shops, %s at %s", st.Proxy.Kind, st.Proxy.URL, len(st.Replicas), st.Redis.Kind, st.Redis.Addrs[0])

	rdb := redisclient.New(redisclient.Settings{}, st.Redis.Addrs[0])
	defer rdb.Close()
	httpClient := &http.Client{Timeout: 10 * time.Second}
	smp := &sampler{http: httpClient, rdb: rdb}
	for _, r := range st.Replicas {
		smp.replicas = append(smp.replicas, replicaRef{r.Name, r.URL})
	}
	stock := min(inventory.MaxStock, int64(float64(o.rate)*o.duration.Seconds()*2)+1000)
	if err := reset(ctx, httpClient, st, stock, o.segments); err != nil {
		return err
	}
	if err := setFaults(ctx, httpClient, st, o.faults); err != nil {
		return err
	}
	rep := &report{Params: params{
		Stage: stage, Rate: o.rate, DurationS: o.duration.Seconds(), SampleS: o.sample.Seconds(), WarmupS: o.warmup.Seconds(),
		IdempotencyTTL: o.idempotencyTTL.String(), Faults: o.faults, RetryRatio: o.retryRatio, Replicas: len(st.Replicas), Segments: o.segments,
		Stock: stock, Proxy: st.Proxy.Kind, Redis: st.Redis.Kind,
	}}

	// The load and the sampler, which ticks from the load's start.
	say("offering %d sales/s on %s for %v, sampling every %v", o.rate, stage, o.duration, o.sample)
	start := time.Now()
	rep.Samples = append(rep.Samples, smp.take(ctx, 0)) // the level before the load
	samplerCtx, stopSampler := context.WithCancel(ctx)
	var sampling sync.WaitGroup
	sampling.Go(func() {
		tick := time.NewTicker(o.sample)
		defer tick.Stop()
		for {
			select {
			case <-samplerCtx.Done():
				return
			case now := <-tick.C:
				s := smp.take(samplerCtx, now.Sub(start).Seconds())
				if samplerCtx.Err() != nil {
					return
				}
				rep.Samples = append(rep.Samples, s)
				say("%s", progressLine(s, o.sample))
			}
		}
	})
	url := st.Proxy.URL + "/api/stages/" + stage + "/deduct?sku=" + sku
	rep.Load = attack(ctx, url, o.rate, o.workers, o.duration, o.sample, newKeySource(o.retryRatio), start)
	stopSampler()
	sampling.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	loadEnd := time.Now()

	checks := newChecks()
	rep.Verdicts = judgeSamples(rep.Samples, o)
	for _, v := range rep.Verdicts {
		checks.add("flat: "+v.Series, v.Flat, fmt.Sprintf("thirds %.4g, %.4g, %.4g; limit %.4g %s", v.First, v.Middle, v.Last, v.Limit, v.Why))
	}
	sampleErrors := 0
	maxLockKeys, maxChannels := int64(0), int64(0)
	for _, s := range rep.Samples {
		for _, sh := range s.Shops {
			if sh.Error != "" {
				sampleErrors++
			}
		}
		if s.Redis.Error != "" {
			sampleErrors++
		}
		maxLockKeys, maxChannels = max(maxLockKeys, s.Redis.LockKeys), max(maxChannels, s.Redis.Channels)
	}
	checks.add("every sample read", sampleErrors == 0, fmt.Sprintf("%d failed reads", sampleErrors))
	checks.add("lock keys bounded by the segments under load", maxLockKeys <= int64(o.segments), fmt.Sprintf("at most %d of %d", maxLockKeys, o.segments))

	total := rep.Load.Total
	checks.add("all but at most 0.1% of requests sold or replayed", total.unanswered()*1000 <= total.Requests,
		fmt.Sprintf("%d of %d: %d errors (%d of unknown outcome), %d retries of an unsettled key, %d busy, %d sold out (%v)",
			total.unanswered(), total.Requests, total.Errors, total.Unknown, total.Unsettled, total.Busy, total.SoldOut, rep.Load.ErrorSamples))
	checks.add("no sale refused as sold out", total.SoldOut == 0, fmt.Sprintf("%d sold out of %d units for %d sales offered", total.SoldOut, stock, o.rate*int(o.duration.Seconds())))
	if o.retryRatio > 0 {
		checks.add("retries were replayed", total.Replays > 0, fmt.Sprintf("%d replays", total.Replays))
	}

	// After the load: locks released, idempotency keys expiring.
	lockKeys, channels := waitNoLocks(ctx, smp, 5*time.Second)
	checks.add("no lock key left after the load", lockKeys == 0, fmt.Sprintf("%d lock keys", lockKeys))
	checks.add("no lock channel left after the load", channels == 0, fmt.Sprintf("%d channels with subscribers (at most %d under load)", channels, maxChannels))
	if rep.Idempotency, err = auditIdempotencyKeys(ctx, rdb); err != nil {
		return fmt.Errorf("idempotency keys: %w", err)
	}
	idem, audited := rep.Idempotency, time.Now()
	checks.add("every idempotency key expires", idem.Keys > 0 && idem.NoTTL == 0 && idem.MaxTTL <= o.idempotencyTTL.Milliseconds(),
		fmt.Sprintf("%d keys, %d without TTL, longest answer's TTL %d ms (configured %v), longest marker's %d ms",
			idem.Keys, idem.NoTTL, idem.MaxTTL, o.idempotencyTTL, idem.MaxPendingTTL))
	// A request that failed may leave its marker until its TTL: its
	// outcome is unknown (its stock write's reply was lost), or deleting
	// it failed too. Any other marker is a request never settled.
	checks.add("no idempotency key pending but an errored request's", idem.Pending <= total.Errors,
		fmt.Sprintf("%d pending markers, %d errored requests", idem.Pending, total.Errors))
	if rep.Audit, err = audit(ctx, httpClient, st); err != nil {
		return err
	}
	a := rep.Audit
	checks.add("the audit balances", a.Oversold == 0 && a.Consistent, fmt.Sprintf("%+v", a.Counts))
	// A write whose reply was lost may have sold without a 200.
	checks.add("sold = first answers of 200 (+ writes of unknown outcome)", a.Sold >= int64(total.Sales) && a.Sold <= int64(total.Sales+total.Unknown),
		fmt.Sprintf("sold %d, sales answered %d, replays %d, errors of unknown outcome %d", a.Sold, total.Sales, total.Replays, total.Unknown))

	// Every key lapses by the later of the answers' TTL after the load and
	// the longest marker's TTL after the audit.
	expired := loadEnd.Add(o.idempotencyTTL + time.Second)
	if markers := audited.Add(time.Duration(idem.MaxPendingTTL)*time.Millisecond + time.Second); markers.After(expired) {
		expired = markers
	}
	say("waiting out the idempotency keys' TTL (%v)", time.Until(expired).Round(time.Second))
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Until(expired)):
	}
	left := waitNoIdempotencyKeys(ctx, smp, 5*time.Second)
	checks.add("idempotency keys gone after their TTL", left == 0, fmt.Sprintf("%d left", left))

	rep.Checks, rep.Passed = checks.list, checks.passed()
	if err := writeReport(filepath.Join(o.out, "soak.json"), rep); err != nil {
		return err
	}
	printSummary(stdout, rep, o)
	if !rep.Passed {
		return fmt.Errorf("%d check(s) failed; see %s", checks.failed(), filepath.Join(o.out, "soak.json"))
	}
	return nil
}

type checkList struct{ list []check }

func newChecks() *checkList { return &checkList{} }

func (c *checkList) add(name string, passed bool, detail string) {
	c.list = append(c.list, check{Name: name, Passed: passed, Detail: strings.TrimSpace(detail)})
}

func (c *checkList) failed() int {
	n := 0
	for _, ch := range c.list {
		if !ch.Passed {
			n++
		}
	}
	return n
}

func (c *checkList) passed() bool { return c.failed() == 0 }

// seriesTolerances are the flatness tolerances; the absolute parts cover
// what is granular (goroutines come and go with connections, Redis
// allocates in steps) and the keys of one sampling interval.
func seriesTolerances(o options) map[string]tolerance {
	mib := float64(1 << 20)
	perSample := float64(o.rate) * o.sample.Seconds()
	return map[string]tolerance{
		"rss":       {Rel: 0.10, Abs: 4 * mib},
		"heap goal": {Rel: 0.20, Abs: 4 * mib},
		// Less one per open HTTP connection: the proxy keeps as many open
		// to each shop as it ever needed at once, so their goroutines
		// climb with each new peak of concurrency, as the Redis pools do
		// (22 → 30 over a minute's look). A goroutine that never ends is
		// counted either way.
		"goroutines":       {Rel: 0.10, Abs: 10},
		"redis keys":       {Rel: 0.10, Abs: perSample},
		"idempotency keys": {Rel: 0.10, Abs: perSample},
		"redis memory":     {Rel: 0.10, Abs: 2 * mib},
		// Not Redis's clients as such: the shops' pools open a connection
		// whenever more commands run at once than they have idle, and keep
		// it, so the count climbs in steps with each new peak of
		// concurrency up to the pools' size (17 → 28 over a minute's look,
		// its peaks still to come). Those idle connections are capacity,
		// not a leak; every leak — a client or pub/sub connection never
		// closed, a pooled one never given back — stays in use.
		"redis clients in use": {Rel: 0.10, Abs: 5},
	}
}

// judgeSamples judges every series of the samples taken after the warm-up.
func judgeSamples(samples []sample, o options) []verdict {
	var after []sample
	for _, s := range samples {
		if s.At >= o.warmup.Seconds() {
			after = append(after, s)
		}
	}
	tol := seriesTolerances(o)
	series := func(f func(sample) float64) []float64 {
		out := make([]float64, len(after))
		for i, s := range after {
			out[i] = f(s)
		}
		return out
	}
	var out []verdict
	if len(samples) > 0 {
		for i, sh := range samples[0].Shops {
			shop := func(f func(shopSample) float64) []float64 {
				return series(func(s sample) float64 { return f(s.Shops[i]) })
			}
			out = append(out,
				judgeFlat(sh.Name+" rss", shop(func(s shopSample) float64 { return s.RSS }), tol["rss"]),
				judgeFlat(sh.Name+" heap goal", shop(func(s shopSample) float64 { return s.HeapGoal }), tol["heap goal"]),
				judgeFlat(sh.Name+" goroutines but connections'", shop(func(s shopSample) float64 { return s.Goroutines - s.HTTPConns }), tol["goroutines"]))
		}
	}
	return append(out,
		judgeFlat("redis keys", series(func(s sample) float64 { return float64(s.Redis.Keys) }), tol["redis keys"]),
		judgeFlat("idempotency keys", series(func(s sample) float64 { return float64(s.Redis.IdempotencyKeys) }), tol["idempotency keys"]),
		judgeFlat("redis memory", series(func(s sample) float64 { return float64(s.Redis.UsedMemory) }), tol["redis memory"]),
		judgeFlat("redis clients in use", series(sample.clientsInUse), tol["redis clients in use"]))
}

func waitNoLocks(ctx context.Context, smp *sampler, within time.Duration) (lockKeys, channels int64) {
	deadline := time.Now().Add(within)
	for {
		r := smp.redis(ctx)
		if (r.Error == "" && r.LockKeys == 0 && r.Channels == 0) || time.Now().After(deadline) || ctx.Err() != nil {
			return r.LockKeys, r.Channels
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func waitNoIdempotencyKeys(ctx context.Context, smp *sampler, within time.Duration) int64 {
	deadline := time.Now().Add(within)
	for {
		r := smp.redis(ctx)
		if (r.Error == "" && r.IdempotencyKeys == 0) || time.Now().After(deadline) || ctx.Err() != nil {
			return r.IdempotencyKeys
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func reset(ctx context.Context, c *http.Client, st workshopState, stock int64, segments int) error {
	body := fmt.Sprintf(`{"sku":%q,"stock":%d,"segments":%d}`, sku, stock, segments)
	_, err := admin(ctx, c, st, http.MethodPost, "/api/stages/"+stage+"/reset", body)
	return err
}

// setFaults sets the stage's faults and waits until every replica runs them.
func setFaults(ctx context.Context, c *http.Client, st workshopState, body string) error {
	answer, err := admin(ctx, c, st, http.MethodPut, "/api/stages/"+stage+"/faults", body)
	if err != nil {
		return err
	}
	var set struct{ Faults json.RawMessage }
	if err := json.Unmarshal(answer, &set); err != nil {
		return fmt.Errorf("faults answer: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	type listedStage struct {
		ID     string
		Faults json.RawMessage
	}
	for _, r := range st.Replicas {
		for {
			var listed struct{ Stages []listedStage }
			err := getJSON(ctx, c, r.URL+"/api/stages", &listed)
			if err == nil && slices.ContainsFunc(listed.Stages, func(s listedStage) bool {
				return s.ID == stage && bytes.Equal(s.Faults, set.Faults)
			}) {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s does not run the faults %s: %w", r.Name, set.Faults, errors.Join(err, ctx.Err()))
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return nil
}

// admin sends an admin request through the proxy and returns the body of
// its 200 answer.
func admin(ctx context.Context, c *http.Client, st workshopState, method, path, body string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, st.Proxy.URL+path, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+st.AdminToken)
	res, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s %s: %s %s", method, path, res.Status, b)
	}
	return b, nil
}

func getJSON(ctx context.Context, c *http.Client, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	res, err := c.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s %s", url, res.Status, b)
	}
	return json.Unmarshal(b, v)
}

func audit(ctx context.Context, c *http.Client, st workshopState) (inventory.Audit, error) {
	var a inventory.Audit
	if err := getJSON(ctx, c, st.Proxy.URL+"/api/stages/"+stage+"/audit?sku="+sku, &a); err != nil {
		return a, fmt.Errorf("audit: %w", err)
	}
	return a, nil
}

func writeReport(path string, rep *report) error {
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// progressLine sums a sample up on one line.
func progressLine(s sample, interval time.Duration) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "t=%4.0fs", s.At)
	for _, sh := range s.Shops {
		if sh.Error != "" {
			fmt.Fprintf(&b, " | %s: %s", sh.Name, sh.Error)
			continue
		}
		fmt.Fprintf(&b, " | %s rss %.1f MiB heap goal %.1f MiB goroutines %.0f", sh.Name, sh.RSS/(1<<20), sh.HeapGoal/(1<<20), sh.Goroutines)
	}
	r := s.Redis
	if r.Error != "" {
		fmt.Fprintf(&b, " | redis: %s", r.Error)
	} else {
		fmt.Fprintf(&b, " | redis keys %d (idempotency %d, locks %d) clients %d (in use %.0f) mem %.1f MiB", r.Keys, r.IdempotencyKeys, r.LockKeys, r.Clients, s.clientsInUse(), float64(r.UsedMemory)/(1<<20))
	}
	return b.String()
}

// printSummary writes the samples (about twelve rows, evenly spaced), the
// verdicts and the checks.
func printSummary(w io.Writer, rep *report, o options) {
	p := rep.Params
	fmt.Fprintf(w, "\nsoak: %s at %d/s for %v through %s, %d shops, %s; samples every %v, warm-up %v, idempotency TTL %s, retry ratio %.2f\n\n",
		p.Stage, p.Rate, o.duration, p.Proxy, p.Replicas, p.Redis, o.sample, o.warmup, p.IdempotencyTTL, p.RetryRatio)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "t s\tsales/s\tp99 ms\tshop RSS MiB\theap goal MiB\tgoroutines\tredis keys\tidempotency\tlocks\tclients\tin use\tredis MiB\t\n")
	step := max(1, len(rep.Samples)/12)
	for i, s := range rep.Samples {
		if i%step != 0 && i != len(rep.Samples)-1 {
			continue
		}
		var rss, goal, gor []string
		for _, sh := range s.Shops {
			rss = append(rss, fmt.Sprintf("%.1f", sh.RSS/(1<<20)))
			goal = append(goal, fmt.Sprintf("%.1f", sh.HeapGoal/(1<<20)))
			gor = append(gor, fmt.Sprintf("%.0f", sh.Goroutines))
		}
		salesPerSec, p99 := "-", "-"
		if k := int(s.At/o.sample.Seconds()) - 1; s.At > 0 && k >= 0 && k < len(rep.Load.Windows) {
			win := rep.Load.Windows[k] // the interval that ended at this sample
			salesPerSec, p99 = fmt.Sprintf("%.0f", float64(win.Sales)/o.sample.Seconds()), fmt.Sprintf("%.1f", win.P99MS)
		}
		r := s.Redis
		fmt.Fprintf(tw, "%.0f\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%.0f\t%.1f\t\n", s.At, salesPerSec, p99,
			strings.Join(rss, "/"), strings.Join(goal, "/"), strings.Join(gor, "/"),
			r.Keys, r.IdempotencyKeys, r.LockKeys, r.Clients, s.clientsInUse(), float64(r.UsedMemory)/(1<<20))
	}
	tw.Flush()
	t := rep.Load.Total
	fmt.Fprintf(w, "\nrequests %d: sales %d, replays %d, sold out %d, busy %d, errors %d (%d of unknown outcome), unsettled retries %d; audit: sold %d, stock %d, oversold %d, consistent %t\n\n",
		t.Requests, t.Sales, t.Replays, t.SoldOut, t.Busy, t.Errors, t.Unknown, t.Unsettled, rep.Audit.Sold, rep.Audit.Stock, rep.Audit.Oversold, rep.Audit.Consistent)
	for _, c := range rep.Checks {
		mark := "ok  "
		if !c.Passed {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "%s %s: %s\n", mark, c.Name, c.Detail)
	}
}
