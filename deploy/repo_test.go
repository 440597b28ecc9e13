package deploy

import (
	"context"
	"flag"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

var update = flag.Bool("update", false, "rewrite the generated files (grafana/dashboards/lockstep.json, deploy/nginx/nginx.conf)")

// repo is the repository root, relative to this package.
const repo = ".."

func repoPath(parts ...string) string { return filepath.Join(append([]string{repo}, parts...)...) }

// tool finds a program the checks run: on PATH, else in the given
// directories (Debian's /usr/sbin is not on every PATH; go install puts k6
// in GOPATH/bin). Without it the test skips, except under CI=true, where
// scripts/install-deps.sh must have installed it.
func tool(t *testing.T, name string, dirs ...string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && st.Mode()&0o111 != 0 {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s not installed (CI=true: scripts/install-deps.sh must install it)", name)
	}
	t.Skipf("%s not installed (scripts/install-deps.sh installs it)", name)
	return ""
}

// loadCompose loads docker-compose.yml the way docker compose v2 does
// (compose-go: schema validation, interpolation with the file's defaults,
// consistency checks), with every profile enabled and no environment of
// this machine, so the defaults are what is checked.
func loadCompose(t *testing.T) *types.Project {
	t.Helper()
	root, err := filepath.Abs(repo)
	if err != nil {
		t.Fatal(err)
	}
	opts, err := cli.NewProjectOptions([]string{filepath.Join(root, "docker-compose.yml")},
		cli.WithWorkingDirectory(root),
		cli.WithEnv([]string{}),
		cli.WithProfiles([]string{"*"}),
		cli.WithConsistency(true),
		cli.WithResolvedPaths(true),
	)
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("compose-go rejects docker-compose.yml: %v", err)
	}
	return p
}

// The compose profiles whose services the checks tell apart: the main
// stack (no profile) and the shop on a Redis Cluster.
const (
	mainStack      = ""
	clusterProfile = "cluster"
)

// inProfile tells whether a service belongs to profile (mainStack: it has
// none, so every up starts it).
func inProfile(s types.ServiceConfig, profile string) bool {
	if profile == mainStack {
		return len(s.Profiles) == 0
	}
	return slices.Contains(s.Profiles, profile)
}

// shopServices are the compose services of profile that run the shop,
// sorted by name.
func shopServices(t *testing.T, p *types.Project, profile string) []types.ServiceConfig {
	t.Helper()
	shops := servicesRunning(p, profile, "shop")
	if len(shops) < 2 {
		t.Fatalf("compose runs %d shop replicas in profile %q, want several", len(shops), profile)
	}
	return shops
}

// servicesRunning are the compose services of profile whose command runs
// program (a command of the lockstep image), sorted by name.
func servicesRunning(p *types.Project, profile, program string) []types.ServiceConfig {
	var out []types.ServiceConfig
	for _, name := range p.ServiceNames() {
		s := p.Services[name]
		if len(s.Command) > 0 && s.Command[0] == program && inProfile(s, profile) {
			out = append(out, s)
		}
	}
	return out
}

func env(s types.ServiceConfig, key string) string {
	if v, ok := s.Environment[key]; ok && v != nil {
		return *v
	}
	return ""
}

// listenPort is the port of an address like ":8080" or "0.0.0.0:9121".
func listenPort(t *testing.T, addr string) int {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("listen address %q: %v", addr, err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatalf("listen address %q: %v", addr, err)
	}
	return n
}

// flagValue finds -name=value or --name=value in args.
func flagValue(args []string, name string) (string, bool) {
	for _, a := range args {
		a = strings.TrimLeft(a, "-")
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v, true
		}
	}
	return "", false
}
