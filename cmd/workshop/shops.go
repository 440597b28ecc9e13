package main

import (
	"context"
	"fmt"
	"github.com/lockstep/lockstep/internal/launch"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// buildShop compiles cmd/shop once into dir, so every replica runs the
// real binary as a separate OS process.
func buildShop(ctx context.Context, dir string) (string, error) {
	out := filepath.Join(dir, "shop")
	if err := launch.BuildShop(ctx, out); err != nil {
		return "", fmt.Errorf("%w(run the workshop from the lockstep checkout, or pass --shop-bin)", err)
	}
	return out, nil
}

// replica is one shop process, restarted when it exits.
type replica struct {
	name string
	addr string
	sup  *supervised
}

func (r *replica) url() string { return "http://" + r.addr }

// replicaName names the i-th replica (from 0).
func replicaName(i int) string { return fmt.Sprintf("shop-%d", i+1) }

// startReplicas starts n shop processes on free loopback ports and waits
// until each is ready; redisEnv gives each its Redis settings (LOCKSTEP_*),
// frontEnv its front door's, read again at every restart.
func startReplicas(ctx context.Context, bin string, n int, redisEnv func(name string) []string, frontEnv func() []string, adminToken, dir string, log *slog.Logger) ([]*replica, error) {
	var replicas []*replica
	stopAll := func() {
		for _, r := range replicas {
			r.sup.stop(syscall.SIGTERM)
		}
	}
	for i := range n {
		port, err := launch.FreePort()
		if err != nil {
			stopAll()
			return nil, err
		}
		r := &replica{name: replicaName(i), addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
		env := append([]string{
			"LOCKSTEP_ADDR=" + r.addr,
			"LOCKSTEP_REDIS_PASSWORD=",
			"LOCKSTEP_REPLICA=" + r.name,
			"LOCKSTEP_ADMIN_TOKEN=" + adminToken,
			"LOCKSTEP_LOG_LEVEL=warn",
		}, redisEnv(r.name)...)
		logPath := filepath.Join(dir, r.name+".log")
		r.sup, err = supervise(r.name, log, func() (*launch.Process, error) {
			return launch.Start(r.name, bin, nil, slices.Concat(env, frontEnv()), logPath)
		})
		if err != nil {
			stopAll()
			return nil, err
		}
		replicas = append(replicas, r)
	}
	for _, r := range replicas {
		if err := waitHTTPReady(ctx, r.url()+"/readyz", r.sup); err != nil {
			stopAll()
			return nil, fmt.Errorf("%s: %w; the end of its log:\n%s", r.name, err, logTail(filepath.Join(dir, r.name+".log")))
		}
	}
	return replicas, nil
}

// logTail returns the last few lines of a log, for errors: the work
// directory holding it is removed when the workshop exits.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-10):], "\n")
}

// waitHTTPReady polls url until it answers 200; a replica that keeps
// exiting fails fast instead of timing out.
func waitHTTPReady(ctx context.Context, url string, sup *supervised) error {
	return launch.WaitHTTPReady(ctx, url, func() error {
		if n := sup.restartCount(); n > 2 {
			return fmt.Errorf("%w, restarted %d times", errExited, n)
		}
		return nil
	})
}

// shopBinary returns --shop-bin when given (checked to be executable),
// else a fresh build.
func shopBinary(ctx context.Context, flagValue, dir string) (string, error) {
	if flagValue == "" {
		return buildShop(ctx, dir)
	}
	if err := checkShopBin(flagValue); err != nil {
		return "", err
	}
	return filepath.Abs(flagValue)
}

// checkShopBin refuses a --shop-bin that is not an executable file; empty
// (build one) passes.
func checkShopBin(flagValue string) error {
	if flagValue == "" {
		return nil
	}
	st, err := os.Stat(flagValue)
	if err != nil {
		return fmt.Errorf("--shop-bin: %w", err)
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return fmt.Errorf("--shop-bin %s is not an executable file", flagValue)
	}
	return nil
}
