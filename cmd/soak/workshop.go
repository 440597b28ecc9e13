package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/lockstep/lockstep/internal/childproc"
)

// prepScenario is what the workshop runs before it stays up (--keep): a
// short paced run of segmented, which proves the set-up sells. The soak
// resets the stock itself afterwards.
const prepScenario = `name: soak preparation
sku: soak
runs:
  - stage: segmented
    stock: 200
    rate: 100
    workers: 4
    duration: 1s
`

// workshopState is the part of workshop.json the soak uses.
type workshopState struct {
	PID        int    `json:"pid"`
	WorkDir    string `json:"work_dir"`
	AdminToken string `json:"admin_token"`
	Proxy      struct {
		Kind string `json:"kind"`
		URL  string `json:"url"`
	} `json:"proxy"`
	Replicas []struct {
		Name string `json:"name"`
		URL  string `json:"url"`
		PID  int    `json:"pid"`
	} `json:"replicas"`
	Redis struct {
		Kind  string   `json:"kind"`
		Addrs []string `json:"addrs"`
	} `json:"redis"`
}

// workshop is a running `workshop --keep`.
type workshop struct {
	cmd   *exec.Cmd
	done  chan struct{}
	state workshopState
}

// buildBinaries compiles the workshop and the shop into dir.
func buildBinaries(ctx context.Context, dir string) (workshopBin, shopBin string, err error) {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", dir+string(filepath.Separator),
		"github.com/lockstep/lockstep/cmd/workshop", "github.com/lockstep/lockstep/cmd/shop")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("go build the workshop and the shop: %w\n%s(run the soak from the lockstep checkout, or pass --workshop-bin and --shop-bin)", err, out)
	}
	return filepath.Join(dir, "workshop"), filepath.Join(dir, "shop"), nil
}

// startWorkshop runs the workshop with the preparation scenario and waits
// until it has run it and stays up. The shops inherit the workshop's
// environment, which carries their idempotency TTL.
func startWorkshop(ctx context.Context, o options, workshopBin, shopBin, dir string) (*workshop, error) {
	scenario := filepath.Join(dir, "prep.yaml")
	if err := os.WriteFile(scenario, []byte(prepScenario), 0o644); err != nil {
		return nil, err
	}
	out := filepath.Join(o.out, "workshop")
	for _, name := range []string{"report.json", "workshop.json"} {
		if err := os.Remove(filepath.Join(out, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(o.out, "workshop.log"))
	if err != nil {
		return nil, err
	}
	// No lock servers: segmented needs none, and MariaDB, etcd's three
	// members and ZooKeeper's three JVMs would take the cores the shops and
	// Redis need (a Redis reply that misses the shops' 300 ms timeout fails
	// a sale).
	cmd := exec.Command(workshopBin, "--keep", "--scenario", scenario, "--out", out,
		"--replicas", strconv.Itoa(o.replicas), "--redis", "server", "--redis-masters", "1", "--lock-servers", "off", "--shop-bin", shopBin)
	cmd.Env = append(os.Environ(), "LOCKSTEP_IDEMPOTENCY_TTL="+o.idempotencyTTL.String())
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group, so a Ctrl-C on the terminal reaches the soak
	// only and the soak stops the workshop in order; and if the soak is
	// killed outright, the kernel tells the workshop to clean up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	exited, err := childproc.Start(cmd, syscall.SIGTERM)
	if err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start the workshop: %w", err)
	}
	w := &workshop{cmd: cmd, done: make(chan struct{})}
	go func() { <-exited; logFile.Close(); close(w.done) }()

	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	for {
		if _, err := os.Stat(filepath.Join(out, "report.json")); err == nil {
			break
		}
		select {
		case <-w.done:
			return nil, fmt.Errorf("the workshop exited before it was up: see %s", logFile.Name())
		case <-ctx.Done():
			w.stop()
			return nil, fmt.Errorf("the workshop is not up: %w (see %s)", ctx.Err(), logFile.Name())
		case <-time.After(100 * time.Millisecond):
		}
	}
	data, err := os.ReadFile(filepath.Join(out, "workshop.json"))
	if err == nil {
		err = json.Unmarshal(data, &w.state)
	}
	if err != nil || w.state.Proxy.URL == "" || len(w.state.Replicas) == 0 || len(w.state.Redis.Addrs) == 0 {
		w.stop()
		return nil, fmt.Errorf("workshop.json: %v: %s", err, data)
	}
	return w, nil
}

// keepShopLogs copies the shops' logs out of the workshop's work
// directory, which the workshop removes when it stops, into dir: a failed
// request's cause is there (the shop logs every 5xx with its error).
func (w *workshop) keepShopLogs(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var errs []error
	for _, r := range w.state.Replicas {
		data, err := os.ReadFile(filepath.Join(w.state.WorkDir, r.Name+".log"))
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, r.Name+".log"), data, 0o644)
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// stop interrupts the workshop, which stops every process it started, and
// kills its process group if it does not finish within half a minute.
func (w *workshop) stop() {
	_ = w.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-w.done:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL)
		<-w.done
	}
}
