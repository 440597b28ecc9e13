// Package launch starts the processes of a local stack the way the
// workshop (cmd/workshop) and the shop's CPU benchmark (bench/shopcpu)
// both need them: a child in a process group of its own, the shop binary
// built from this tree, nginx with the project's nginx.conf in a private
// prefix, and a wait until an HTTP endpoint answers 200.
package launch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/lockstep/lockstep/internal/childproc"
	"github.com/lockstep/lockstep/internal/proc"
	"github.com/lockstep/lockstep/nginx"
)

// StopGrace is how long a child gets to exit after its polite signal before
// its whole process group is killed.
const StopGrace = 5 * time.Second

// Process is one child process, in a process group of its own so that
// stopping it also stops what it forked (nginx's workers), and so that a
// Ctrl-C on the terminal reaches only the parent, which then stops the
// children in order.
type Process struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed once Wait returned
	err  error         // Wait's result, set before done closes
}

// Start starts bin with env added to this process's environment and its
// output appended to logPath.
func Start(name, bin string, args, env []string, logPath string) (*Process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: log: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// The parent-death signal: if the parent itself is killed outright
	// (SIGKILL), the kernel signals the child instead of leaving it
	// running. SIGTERM, not SIGKILL: nginx's master must live long enough
	// to stop its workers. childproc forks from a thread that lives as
	// long as the child, since the signal fires when that thread exits.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	exited, err := childproc.Start(cmd, syscall.SIGTERM)
	if err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = <-exited
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// Name is the name it was started with.
func (p *Process) Name() string { return p.name }

// Pid is its process id, which is also its process group's.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed once it has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is how it exited (exec.Cmd.Wait's error), once Done is closed.
func (p *Process) Err() error {
	<-p.done
	return p.err
}

// Running is nil while it runs, and says how it exited once it has:
// WaitHTTPReady's failed check for a child that must stay up.
func (p *Process) Running() error {
	if !p.Exited() {
		return nil
	}
	return fmt.Errorf("%s exited: %w", p.name, p.err)
}

// Exited reports whether it has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Signal sends sig to the process itself (not its group).
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Stop sends sig to the process, waits up to StopGrace, then kills its
// whole group; it returns once the process has exited and its group is
// empty, so nothing it forked outlives it.
func (p *Process) Stop(sig syscall.Signal) {
	pgid := p.Pid() // Setpgid: the group id is the leader's pid
	if !p.Exited() {
		_ = p.cmd.Process.Signal(sig)
		_ = p.cmd.Process.Signal(syscall.SIGCONT) // a stopped process must run to exit
		select {
		case <-p.done:
		case <-time.After(StopGrace):
		}
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	<-p.done
	deadline := time.Now().Add(StopGrace)
	for len(proc.Group(pgid)) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
}

// ShopPackage is the shop's main package, which BuildShop compiles.
const ShopPackage = "github.com/lockstep/lockstep/cmd/shop"

// BuildShop compiles cmd/shop into out with the go command; it needs the
// lockstep checkout as the working directory (or one below it).
func BuildShop(ctx context.Context, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, ShopPackage)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", ShopPackage, err, msg)
	}
	return nil
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// FreeAddr is a loopback host:port that was free a moment ago.
func FreeAddr() (string, error) {
	port, err := FreePort()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), nil
}

// readyWithin bounds WaitHTTPReady.
const readyWithin = 20 * time.Second

// WaitHTTPReady polls url until it answers 200, for at most 20 s. failed,
// when given, is asked after every failed poll: its error ends the wait at
// once (a child that keeps exiting fails fast instead of timing out).
func WaitHTTPReady(ctx context.Context, url string, failed func() error) error {
	ctx, cancel := context.WithTimeout(ctx, readyWithin)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("readiness: %w", err)
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		if failed != nil {
			if ferr := failed(); ferr != nil {
				return fmt.Errorf("not ready: %w", ferr)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready: %w (last: %w)", ctx.Err(), err)
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// NginxBinary finds nginx on PATH or where Debian installs it (/usr/sbin is
// not on every user's PATH).
func NginxBinary() (string, error) {
	if bin, err := exec.LookPath("nginx"); err == nil {
		return bin, nil
	}
	const debian = "/usr/sbin/nginx"
	if st, err := os.Stat(debian); err == nil && st.Mode()&0o111 != 0 {
		return debian, nil
	}
	return "", errors.New("nginx not found on PATH or in /usr/sbin")
}

// Nginx is an nginx started by StartNginx.
type Nginx struct {
	*Process
	URL    string       // http://<its listen address>
	Prefix string       // its private prefix: nginx.conf, logs/
	Config nginx.Config // what its nginx.conf was rendered from (Listen filled in)
}

// StartNginx renders nginx/nginx.conf with cfg (on a free loopback port
// when cfg.Listen is empty) into the private prefix dir and runs bin in the
// foreground, in its own process group with its workers, until /healthz
// answers through it. Stop it with SIGQUIT, nginx's graceful shutdown.
func StartNginx(ctx context.Context, bin, dir string, cfg nginx.Config) (*Nginx, error) {
	for _, d := range []string{"logs", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, fmt.Errorf("nginx prefix: %w", err)
		}
	}
	if cfg.Listen == "" {
		listen, err := FreeAddr()
		if err != nil {
			return nil, err
		}
		cfg.Listen = listen
	}
	confPath := filepath.Join(dir, "nginx.conf")
	if err := writeNginxConf(confPath, cfg); err != nil {
		return nil, err
	}
	p, err := Start("nginx", bin, []string{"-p", dir, "-c", confPath, "-g", "daemon off;"}, nil, filepath.Join(dir, "logs", "stdout.log"))
	if err != nil {
		return nil, err
	}
	n := &Nginx{Process: p, URL: "http://" + cfg.Listen, Prefix: dir, Config: cfg}
	if err := WaitHTTPReady(ctx, n.URL+"/healthz", nil); err != nil {
		p.Stop(syscall.SIGQUIT)
		log, _ := os.ReadFile(filepath.Join(dir, "logs", "error.log"))
		return nil, fmt.Errorf("nginx: %w\n%s", err, log)
	}
	return n, nil
}

func writeNginxConf(path string, cfg nginx.Config) error {
	var conf bytes.Buffer
	if err := nginx.Render(&conf, cfg); err != nil {
		return err
	}
	if err := os.WriteFile(path, conf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write nginx.conf: %w", err)
	}
	return nil
}

// Reload renders nginx.conf from cfg (its Listen kept) and reloads nginx
// (SIGHUP), returning once the workers of the old configuration are gone,
// so every request from then on meets the new one. The old workers get
// grace to finish gracefully, then are told to exit at once (SIGTERM,
// nginx's fast shutdown of a worker): idle keep-alive connections can keep
// one alive for more than 10 s.
func (n *Nginx) Reload(ctx context.Context, cfg nginx.Config, grace time.Duration) error {
	cfg.Listen = n.Config.Listen
	if err := writeNginxConf(filepath.Join(n.Prefix, "nginx.conf"), cfg); err != nil {
		return err
	}
	n.Config = cfg
	master := n.Pid()
	old := slices.DeleteFunc(proc.Group(master), func(pid int) bool { return pid == master })
	if err := n.Signal(syscall.SIGHUP); err != nil {
		return fmt.Errorf("reload nginx: %w", err)
	}
	graceOver := time.After(grace)
	ctx, cancel := context.WithTimeout(ctx, grace+StopGrace)
	defer cancel()
	for slices.ContainsFunc(old, proc.Alive) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("reload nginx: the old workers %v still run: %w", old, ctx.Err())
		case <-graceOver:
			for _, pid := range old {
				_ = syscall.Kill(pid, syscall.SIGTERM)
			}
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}
