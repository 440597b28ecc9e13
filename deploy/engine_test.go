package deploy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// engine is the Docker engine the test drives through the docker CLI.
type engine struct {
	docker string
}

func (e *engine) command(args ...string) *exec.Cmd { return exec.Command(e.docker, args...) }

// output runs a docker command and returns its standard output.
func (e *engine) output(args ...string) (string, error) {
	var stderr bytes.Buffer
	cmd := e.command(args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return string(out), nil
}

// skipOrFail skips the test, except under CI=true, where the engine run is
// part of what make test proves.
func skipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// engineCache is where what outlives a run is kept: the stand-ins' root,
// the image layers of the engine the test starts, the compose plugin
// (scripts/install-compose.sh). One directory for a CI cache to keep.
func engineCache(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("LOCKSTEP_CACHE")
	if dir == "" {
		dir = "/var/cache/lockstep"
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		skipOrFail(t, "cache directory: %v", err)
	}
	return dir
}

// lockEngine serialises the engine tests of every go test on this machine
// (one engine, one set of stand-in tags) until the test ends.
func lockEngine(t *testing.T, cache string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(cache, "engine-test.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
}

// startEngine returns the Docker engine that runs, or starts dockerd (as
// root) with its store in the cache, stopped when the test ends.
func startEngine(t *testing.T, cache string) *engine {
	t.Helper()
	e := &engine{docker: tool(t, "docker")}
	if _, err := e.output("info", "--format", "{{.ServerVersion}}"); err == nil {
		t.Log("Docker engine: the one running")
		return e
	}
	if os.Geteuid() != 0 {
		skipOrFail(t, "no Docker engine runs, and starting one needs root")
	}
	dockerd := tool(t, "dockerd", "/usr/sbin")
	logPath := filepath.Join(t.TempDir(), "dockerd.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(dockerd, "--data-root", filepath.Join(cache, "docker"))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		skipOrFail(t, "dockerd: %v", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(done)
	}()
	// dockerd stops its containers and its containerd on SIGTERM.
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		version, err := e.output("info", "--format", "{{.ServerVersion}} {{.Driver}}")
		if err == nil {
			t.Logf("Docker engine: dockerd %s started by the test (store %s)", strings.TrimSpace(version), filepath.Join(cache, "docker"))
			return e
		}
		select {
		case <-done:
			log, _ := os.ReadFile(logPath)
			skipOrFail(t, "dockerd exited: %s", tail(string(log), 30))
		case <-time.After(250 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logPath)
			skipOrFail(t, "dockerd not answering after 60s: %v\n%s", err, tail(string(log), 30))
		}
	}
}

// composeImages are the images docker-compose.yml pulls and the ones its
// builds start from (the Dockerfile's FROMs), without repeats.
func composeImages(t *testing.T) []string {
	t.Helper()
	p := loadCompose(t)
	var images []string
	add := func(image string) {
		if !slices.Contains(images, image) {
			images = append(images, image)
		}
	}
	built := false
	for _, name := range p.ServiceNames() {
		s := p.Services[name]
		if s.Build != nil {
			built = true
			continue
		}
		add(s.Image)
	}
	if built {
		stageNames := map[string]bool{}
		for _, st := range parseDockerfile(t) {
			if !stageNames[st.BaseName] {
				add(st.BaseName)
			}
			stageNames[st.Name] = true
		}
	}
	return images
}

// composeProject is one run of docker-compose.yml under its own project
// name, its published ports on free ones.
type composeProject struct {
	e         *engine
	name      string
	env       []string
	network   string
	published map[string]string // port variable → the address it publishes on
	// profile is the one up enabled besides the main stack: down must name
	// it too, or it leaves that profile's containers.
	profile string
	downed  bool
}

// profileArgs enable, on a compose command, the profile up enabled.
func (c *composeProject) profileArgs() []string {
	if c.profile == mainStack {
		return nil
	}
	return []string{"--profile", c.profile}
}

func (c *composeProject) command(args ...string) *exec.Cmd {
	root, _ := filepath.Abs(repo)
	cmd := c.e.command(append([]string{"compose", "-p", c.name, "--project-directory", root,
		"-f", filepath.Join(root, "docker-compose.yml")}, args...)...)
	cmd.Env = append(os.Environ(), c.env...)
	return cmd
}

// run runs a compose command, logs how long it took and returns its
// output, failing the test with it if the command fails.
func (c *composeProject) run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := c.runErr(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// runErr is run that returns the failure, the command's output in it.
func (c *composeProject) runErr(t *testing.T, args ...string) (string, error) {
	t.Helper()
	start := time.Now()
	out, err := c.command(args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("docker compose %s: %w\n%s", strings.Join(args, " "), err, tail(string(out), 80))
	}
	t.Logf("docker compose %s: %s", strings.Join(args, " "), time.Since(start).Round(100*time.Millisecond))
	return string(out), nil
}

// networkClient is an HTTP client whose connections start inside the
// compose network, as Grafana's would: each is busybox nc in a throwaway
// alpine container on that network, its standard input and output the
// connection.
func (c *composeProject) networkClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(_ context.Context, _, addr string) (net.Conn, error) {
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			return startPipeConn(c.e.command("run", "--rm", "-i", "--network", c.network, "alpine:3.22", "nc", host, port))
		},
		MaxIdleConnsPerHost: 2,
	}}
}

// pipeConn is a net.Conn over a process's standard input and output.
type pipeConn struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out io.ReadCloser
}

func startPipeConn(cmd *exec.Cmd) (*pipeConn, error) {
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &pipeConn{cmd: cmd, in: in, out: out}, nil
}

func (p *pipeConn) Read(b []byte) (int, error)  { return p.out.Read(b) }
func (p *pipeConn) Write(b []byte) (int, error) { return p.in.Write(b) }

// Close ends the input: nc shuts its side of the connection, the server
// closes, and nc and its container end. Killing the docker CLI instead
// would leave the container on the network.
func (p *pipeConn) Close() error {
	p.in.Close()
	done := make(chan struct{})
	go func() {
		_ = p.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
	return nil
}
func (p *pipeConn) LocalAddr() net.Addr              { return pipeAddr{} }
func (p *pipeConn) RemoteAddr() net.Addr             { return pipeAddr{} }
func (p *pipeConn) SetDeadline(time.Time) error      { return nil }
func (p *pipeConn) SetReadDeadline(time.Time) error  { return nil }
func (p *pipeConn) SetWriteDeadline(time.Time) error { return nil }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "docker-run-nc" }
