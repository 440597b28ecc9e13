// Package plan is the scenario model: what a workshop run walks through
// (Scenario, its RunSpecs, their load shapes, faults, crash, payment and
// fault steps), read from YAML or JSON, its defaults filled and its own
// rules checked.
//
// It owns the scenario file's schema, which params.scenario in report.json
// repeats. It does no I/O beyond reading a scenario file, and must not
// import the rest of loadgen, vegeta, HTTP or Redis clients, nor the
// stores' packages: the shop's own limits it checks (the largest stock
// and segment count, the fault knobs' rules) come in the Shop its caller
// passes (internal/shoprules). What needs other packages (the
// expectations' grammar, which stages are async) is checked by
// loadgen.ParseScenario on top of Parse.
package plan

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

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
	// Bots, optional, makes the requests a spike's two kinds of buyer
	// (bots.go); not with Buyers.
	Bots *Bots `yaml:"bots" json:"bots,omitempty"`
	// FrontDoor, optional, is the limiter and sold-out mark the run's
	// replicas (and nginx) put before the stage (frontdoor.go); without
	// it the workshop's flags choose.
	FrontDoor *FrontDoor `yaml:"front_door" json:"front_door,omitempty"`
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
	// payment sweeper (plan/payment.go).
	Payment *PaymentStep `yaml:"payment" json:"payment,omitempty"`
	// HoldWorkers, on an async stage, holds the order workers (SIGSTOP)
	// through the load and lets them go on when it ends: the admissions
	// have the machine to themselves, as when the workers run elsewhere,
	// and the drain that follows times the workers alone on the backlog.
	HoldWorkers bool `yaml:"hold_workers" json:"hold_workers,omitempty"`
	// Fault, instead of the load phase, runs one of the failure scenarios'
	// fault steps (plan/fault.go).
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

// Describe lists the fault knobs that are set, e.g. "work 2ms, 1% slow 300ms, ttl 200ms".
func (f Faults) Describe() string {
	var parts []string
	if f.Work > 0 {
		w := "work " + f.Work.String()
		if f.WorkMax > f.Work {
			w += "–" + f.WorkMax.String()
		}
		parts = append(parts, w)
	}
	if f.SlowRatio > 0 {
		parts = append(parts, fmt.Sprintf("%g%% slow %s", f.SlowRatio*100, f.Slow))
	}
	if f.LockTTL > 0 {
		parts = append(parts, "lock ttl "+f.LockTTL.String())
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
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

// defaultStock is a run's stock when neither it nor the defaults set one.
const defaultStock = 500

// RunCheck says what is wrong with a run by rules plan does not own (nil:
// nothing); Parse reports each error prefixed with the run, like its own.
type RunCheck func(RunSpec) []error

// Parse parses a YAML or JSON scenario, fills in defaults and checks its
// own rules and check's, so a bad file fails before anything is attacked.
func Parse(data []byte, shop Shop, check RunCheck) (*Scenario, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var sc Scenario
	if err := dec.Decode(&sc); err != nil {
		return nil, fmt.Errorf("parse: %w", explainUnknownFields(err))
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
	if err := sc.validate(shop, check); err != nil {
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

// Expects reports whether any run has expectations.
func (sc *Scenario) Expects() bool {
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
	if c.Bots == nil {
		c.Bots = defaults.Bots
	}
	if c.FrontDoor == nil {
		c.FrontDoor = defaults.FrontDoor
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

func (sc *Scenario) validate(shop Shop, check RunCheck) error {
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
		case shop.MaxStock > 0 && int(run.Stock) > shop.MaxStock:
			errs = append(errs, fmt.Errorf("%s: stock %d: must be within 1..%d (leave it out for the default)", where, run.Stock, shop.MaxStock))
		case run.Segments < 0 || shop.MaxSegments > 0 && run.Segments > shop.MaxSegments:
			errs = append(errs, fmt.Errorf("%s: segments must be within 0..%d (0: the shop's default)", where, shop.MaxSegments))
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
		case run.HoldWorkers && (run.Fault != nil || run.Crash != nil || run.Payment != nil):
			errs = append(errs, fmt.Errorf("%s: hold_workers holds the workers through the load alone, without a fault, crash or payment step", where))
		}
		if run.Buyers != nil {
			if err := run.Buyers.validate(); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", where, err))
			}
		}
		if run.Bots != nil {
			if err := run.Bots.validate(); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", where, err))
			}
			if run.Buyers != nil {
				errs = append(errs, fmt.Errorf("%s: bots and buyers are two populations: give one", where))
			}
		}
		if run.FrontDoor != nil {
			if err := run.FrontDoor.validate(); err != nil {
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
		if shop.Faults != nil {
			if err := shop.Faults(run.Faults); err != nil {
				errs = append(errs, fmt.Errorf("%s: faults: %w", where, err))
			}
		}
		if check != nil {
			for _, err := range check(run) {
				errs = append(errs, fmt.Errorf("%s: %w", where, err))
			}
		}
	}
	return errors.Join(errs...)
}
