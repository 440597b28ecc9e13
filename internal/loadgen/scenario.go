package loadgen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lockstep/lockstep/inventory"
	"github.com/lockstep/lockstep/segments"
	"gopkg.in/yaml.v3"
)

// Scenario is what a workshop run walks through: the stage runs in order,
// each with its stock, load shape, fault knobs, optional crash step and the
// outcome the articles predict. It is read from YAML (or JSON, which YAML
// parses too).
type Scenario struct {
	Name        string    `yaml:"name" json:"name"`
	Description string    `yaml:"description" json:"description,omitempty"`
	SKU         string    `yaml:"sku" json:"sku"`
	Defaults    RunConfig `yaml:"defaults" json:"defaults"`
	Runs        []RunSpec `yaml:"runs" json:"runs"`
}

// RunConfig is the load shape of one attack; a RunSpec's own values override the
// scenario defaults field by field.
type RunConfig struct {
	Stock        Stock    `yaml:"stock" json:"stock"`
	Segments     int      `yaml:"segments" json:"segments,omitempty"`
	Rate         *Rate    `yaml:"rate" json:"rate,omitempty"`
	Workers      int      `yaml:"workers" json:"workers"`
	Duration     Duration `yaml:"duration" json:"duration"`
	UntilSoldOut *bool    `yaml:"until_sold_out" json:"until_sold_out,omitempty"`
	Timeout      Duration `yaml:"timeout" json:"timeout"`
	// Buyers, optional, names a buyer in every sale (the order stages).
	Buyers *Buyers `yaml:"buyers" json:"buyers,omitempty"`
}

// RunSpec is one stage run of the scenario.
type RunSpec struct {
	Stage string `yaml:"stage" json:"stage"`
	// Via is "proxy" (the target URL, default) or "one-replica" (the first
	// replica's own URL, to show what a single process does).
	Via       string `yaml:"via" json:"via"`
	RunConfig `yaml:",inline"`
	Faults    Faults     `yaml:"faults" json:"faults"`
	Crash     *CrashStep `yaml:"crash" json:"crash,omitempty"`
	// Payment, after an async stage's load, races payments against the
	// payment sweeper (payment.go).
	Payment *PaymentStep `yaml:"payment" json:"payment,omitempty"`
	// HoldWorkers, on an async stage, holds the order workers (SIGSTOP)
	// through the load and lets them go on when it ends: the admissions
	// have the machine to themselves, as when the workers run elsewhere,
	// and the drain that follows times the workers alone on the backlog.
	HoldWorkers bool `yaml:"hold_workers" json:"hold_workers,omitempty"`
	// Fault, instead of the load phase, runs one of the failure scenarios'
	// fault steps (faultstep.go).
	Fault  *FaultStep `yaml:"fault" json:"fault,omitempty"`
	Expect []string   `yaml:"expect" json:"expect,omitempty"`
	// Label names the row when one stage runs in several ways (e.g.
	// "watchdog+WAIT"); other runs' checks refer to rows by label.
	Label string `yaml:"label" json:"label,omitempty"`
}

// Via values.
const (
	ViaProxy      = "proxy"
	ViaOneReplica = "one-replica"
)

// Faults are the shop's per-stage fault knobs, in the body shape of
// PUT /api/stages/{stage}/faults.
type Faults struct {
	Work             Duration `yaml:"work" json:"work,omitempty"`
	WorkMax          Duration `yaml:"work_max" json:"work_max,omitempty"`
	SlowRatio        float64  `yaml:"slow_ratio" json:"slow_ratio,omitempty"`
	Slow             Duration `yaml:"slow" json:"slow,omitempty"`
	LockTTL          Duration `yaml:"lock_ttl" json:"lock_ttl,omitempty"`
	CrashHoldingLock bool     `yaml:"crash_holding_lock" json:"crash_holding_lock"`
	// PauseBeforeWrite is armed by the pause and failover fault steps.
	PauseBeforeWrite bool     `yaml:"pause_before_write" json:"pause_before_write"`
	TrackHolders     bool     `yaml:"track_holders" json:"track_holders"`
	WaitReplicas     int      `yaml:"wait_replicas" json:"wait_replicas,omitempty"`
	WaitTimeout      Duration `yaml:"wait_timeout" json:"wait_timeout,omitempty"`
	// Fence: etcd and zookeeper check their lock's fencing token at the
	// stock write.
	Fence bool `yaml:"fence" json:"fence,omitempty"`
}

// shop returns the faults as the shop's inventory takes them.
func (f Faults) shop() inventory.Faults {
	return inventory.Faults{
		Work: f.Work.D(), WorkMax: f.WorkMax.D(), SlowRatio: f.SlowRatio, Slow: f.Slow.D(),
		LockTTL: f.LockTTL.D(), CrashHoldingLock: f.CrashHoldingLock, PauseBeforeWrite: f.PauseBeforeWrite,
		TrackHolders: f.TrackHolders, WaitReplicas: f.WaitReplicas, WaitTimeout: f.WaitTimeout.D(),
		Fence: f.Fence,
	}
}

// CrashStep makes one replica exit while it holds the stage's lock, then
// keeps offering sales at a fixed rate to see whether, and how fast, the
// stage recovers. It runs after the load phase on freshly reset stock, with
// the run's faults minus the slow requests.
type CrashStep struct {
	Observe Duration `yaml:"observe" json:"observe"`
	// Rate is fixed (default 200/s) so "no sale for the whole window" means
	// the same thing on every machine.
	Rate    Rate `yaml:"rate" json:"rate"`
	Workers int  `yaml:"workers" json:"workers"`
}

// Stock is a run's stock. Written in a scenario it is within
// 1..inventory.MaxStock: an unset one takes the default, so a written 0
// is refused rather than silently becoming it.
type Stock int

// UnmarshalYAML accepts a whole number within 1..inventory.MaxStock.
func (s *Stock) UnmarshalYAML(node *yaml.Node) error {
	var n int
	if err := node.Decode(&n); err != nil {
		return fmt.Errorf("stock %q: want a whole number", node.Value)
	}
	if n < 1 || n > inventory.MaxStock {
		return fmt.Errorf("stock %d: must be within 1..%d (leave it out for the default)", n, inventory.MaxStock)
	}
	*s = Stock(n)
	return nil
}

// Rate is requests per second; 0 means as fast as the workers go ("max").
type Rate int

// MaxRate is the Rate that lets the workers send as fast as answers come.
const MaxRate Rate = 0

func (r Rate) String() string {
	if r == MaxRate {
		return "max"
	}
	return strconv.Itoa(int(r)) + "/s"
}

// UnmarshalYAML accepts "max" or a non-negative number.
func (r *Rate) UnmarshalYAML(node *yaml.Node) error {
	return r.parse(node.Value)
}

// MarshalJSON writes "max" or the number.
func (r Rate) MarshalJSON() ([]byte, error) {
	if r == MaxRate {
		return []byte(`"max"`), nil
	}
	return []byte(strconv.Itoa(int(r))), nil
}

// UnmarshalJSON accepts what MarshalJSON writes.
func (r *Rate) UnmarshalJSON(b []byte) error {
	return r.parse(strings.Trim(string(b), `"`))
}

func (r *Rate) parse(s string) error {
	if strings.EqualFold(s, "max") {
		*r = MaxRate
		return nil
	}
	n, err := strconv.Atoi(strings.TrimSuffix(s, "/s"))
	if err != nil || n < 0 {
		return fmt.Errorf("rate %q: want \"max\" or requests per second", s)
	}
	*r = Rate(n)
	return nil
}

// Duration is a time.Duration written as "250ms" in scenarios and reports.
type Duration time.Duration

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }

// UnmarshalYAML accepts a Go duration string.
func (d *Duration) UnmarshalYAML(node *yaml.Node) error { return d.parse(node.Value) }

// MarshalJSON writes the Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON accepts a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	return d.parse(s)
}

func (d *Duration) parse(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return fmt.Errorf("duration %q: want a non-negative Go duration such as 250ms", s)
	}
	*d = Duration(v)
	return nil
}

// LoadScenario reads a scenario file.
func LoadScenario(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read scenario: %w", err)
	}
	sc, err := ParseScenario(data)
	if err != nil {
		return nil, fmt.Errorf("scenario %s: %w", path, err)
	}
	return sc, nil
}

// defaultStock is a run's stock when neither it nor the defaults set one.
const defaultStock = 500

// ParseScenario parses a YAML or JSON scenario, fills in defaults and checks
// it, so a bad file fails before anything is attacked.
func ParseScenario(data []byte) (*Scenario, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var sc Scenario
	if err := dec.Decode(&sc); err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	if sc.SKU == "" {
		sc.SKU = "sku-1"
	}
	sc.Defaults = sc.Defaults.merge(RunConfig{Stock: defaultStock, Workers: 32, Duration: Duration(5 * time.Second), Timeout: Duration(10 * time.Second)})
	for i := range sc.Runs {
		run := &sc.Runs[i]
		run.RunConfig = run.RunConfig.merge(sc.Defaults)
		if run.Via == "" {
			run.Via = ViaProxy
		}
		if run.Crash != nil {
			if run.Crash.Workers == 0 {
				run.Crash.Workers = 8
			}
			if run.Crash.Rate == MaxRate {
				run.Crash.Rate = 200
			}
		}
		if run.Fault != nil {
			run.Fault.setDefaults()
		}
	}
	if err := sc.validate(); err != nil {
		return nil, err
	}
	return &sc, nil
}

// Only keeps the runs of the given stages, in scenario order.
func (sc *Scenario) Only(stages []string) error {
	var kept []RunSpec
	for _, run := range sc.Runs {
		if slices.Contains(stages, run.Stage) {
			kept = append(kept, run)
		}
	}
	if len(kept) == 0 {
		return fmt.Errorf("scenario %q has no run of %s", sc.Name, strings.Join(stages, ", "))
	}
	sc.Runs = kept
	return nil
}

// expects reports whether any run has expectations.
func (sc *Scenario) expects() bool {
	return slices.ContainsFunc(sc.Runs, func(run RunSpec) bool { return len(run.Expect) > 0 })
}

// merge returns c with its unset fields taken from defaults.
func (c RunConfig) merge(defaults RunConfig) RunConfig {
	if c.Stock == 0 {
		c.Stock = defaults.Stock
	}
	if c.Segments == 0 {
		c.Segments = defaults.Segments
	}
	if c.Rate == nil {
		c.Rate = defaults.Rate
	}
	if c.Workers == 0 {
		c.Workers = defaults.Workers
	}
	if c.Duration == 0 {
		c.Duration = defaults.Duration
	}
	if c.UntilSoldOut == nil {
		c.UntilSoldOut = defaults.UntilSoldOut
	}
	if c.Timeout == 0 {
		c.Timeout = defaults.Timeout
	}
	if c.Buyers == nil {
		c.Buyers = defaults.Buyers
	}
	return c
}

// AttackRate is the configured rate, MaxRate when none is set.
func (c RunConfig) AttackRate() Rate {
	if c.Rate == nil {
		return MaxRate
	}
	return *c.Rate
}

// StopsWhenSoldOut reports whether the attack ends at the first sold-out answer.
func (c RunConfig) StopsWhenSoldOut() bool { return c.UntilSoldOut != nil && *c.UntilSoldOut }

func (sc *Scenario) validate() error {
	if len(sc.Runs) == 0 {
		return errors.New("no runs")
	}
	var errs []error
	for i, run := range sc.Runs {
		where := fmt.Sprintf("runs[%d] (%s)", i, run.Stage)
		switch {
		case run.Stage == "":
			errs = append(errs, fmt.Errorf("%s: stage is required", where))
		case run.Via != ViaProxy && run.Via != ViaOneReplica:
			errs = append(errs, fmt.Errorf("%s: via %q: want %q or %q", where, run.Via, ViaProxy, ViaOneReplica))
		case run.Segments < 0 || run.Segments > segments.MaxCount:
			errs = append(errs, fmt.Errorf("%s: segments must be within 0..%d (0: the shop's default)", where, segments.MaxCount))
		case run.Workers < 1:
			errs = append(errs, fmt.Errorf("%s: workers must be at least 1", where))
		case run.Duration <= 0:
			errs = append(errs, fmt.Errorf("%s: duration must be positive", where))
		case run.Faults.CrashHoldingLock:
			errs = append(errs, fmt.Errorf("%s: crash_holding_lock belongs in a crash step, not in the load faults", where))
		case run.Faults.PauseBeforeWrite:
			errs = append(errs, fmt.Errorf("%s: pause_before_write is armed by the pause and failover fault steps, not in the load faults", where))
		case run.Fault != nil && run.Crash != nil:
			errs = append(errs, fmt.Errorf("%s: a run has a crash step or a fault step, not both", where))
		case run.Crash != nil && run.Crash.Observe <= 0:
			errs = append(errs, fmt.Errorf("%s: crash.observe must be positive", where))
		case run.Crash != nil && run.Crash.Workers < 1:
			errs = append(errs, fmt.Errorf("%s: crash.workers must be at least 1", where))
		case run.HoldWorkers && !isAsync(run.Stage):
			errs = append(errs, fmt.Errorf("%s: hold_workers holds the order workers of an async stage", where))
		case run.HoldWorkers && (run.Fault != nil || run.Crash != nil || run.Payment != nil):
			errs = append(errs, fmt.Errorf("%s: hold_workers holds the workers through the load alone, without a fault, crash or payment step", where))
		}
		if run.Buyers != nil {
			if err := run.Buyers.validate(); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", where, err))
			}
		}
		if run.Fault != nil {
			if err := run.Fault.validate(); err != nil {
				errs = append(errs, fmt.Errorf("%s: fault: %w", where, err))
			}
		}
		if run.Payment != nil {
			if err := run.Payment.validate(); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", where, err))
			}
		}
		// The shop's own rules, so a fault it would refuse fails here.
		if err := run.Faults.shop().Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%s: faults: %w", where, err))
		}
		for _, e := range run.Expect {
			if _, err := parseCheck(e); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", where, err))
			}
		}
	}
	return errors.Join(errs...)
}
