package deploy

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/compose-spec/compose-go/v2/types"
)

// imageFacts is what docker-compose.yml relies on in one image, as
// deploy/images.json records it from the image's own sources.
type imageFacts struct {
	Image         string   `json:"image"`
	Architectures []string `json:"architectures"`
	Entrypoint    []string `json:"entrypoint"`
	// EntrypointRunsCommand: the entrypoint execs the command it is given,
	// which therefore names a program of the image.
	EntrypointRunsCommand bool     `json:"entrypointRunsCommand"`
	Cmd                   []string `json:"cmd"`
	User                  string   `json:"user"`
	Workdir               string   `json:"workdir"`
	Volumes               []string `json:"volumes"`
	Env                   []string `json:"env"`
	Reads                 []string `json:"reads"`
	ReadPrefixes          []string `json:"readPrefixes"`
	// ReadsScriptEnv: the program hands every variable to the scripts it
	// runs (k6's __ENV), so a variable named by a mounted script is read.
	ReadsScriptEnv bool              `json:"readsScriptEnv"`
	Programs       []string          `json:"programs"`
	Provisioning   []string          `json:"provisioning"`
	Sources        map[string]string `json:"sources"`
}

// builtImageReads: the project's own commands (the Dockerfile's image)
// read LOCKSTEP_ variables, each flag's fallback.
var builtImageReads = []string{"LOCKSTEP_"}

func readImageFacts(t *testing.T) map[string]imageFacts {
	t.Helper()
	data, err := os.ReadFile(repoPath("deploy", "images.json"))
	if err != nil {
		t.Fatal(err)
	}
	var table struct {
		Images []imageFacts `json:"images"`
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&struct {
		About  []string      `json:"about"`
		Images *[]imageFacts `json:"images"`
	}{Images: &table.Images}); err != nil {
		t.Fatalf("deploy/images.json: %v", err)
	}
	facts := map[string]imageFacts{}
	for _, f := range table.Images {
		if _, dup := facts[f.Image]; dup {
			t.Fatalf("deploy/images.json: %s twice", f.Image)
		}
		facts[f.Image] = f
	}
	return facts
}

// envDefault is the value the image's ENV gives name, or "".
func (f imageFacts) envDefault(name string) string {
	for _, kv := range f.Env {
		if k, v, _ := strings.Cut(kv, "="); k == name {
			return v
		}
	}
	return ""
}

// reads tells whether the image reads the environment variable name.
func (f imageFacts) reads(name string) bool {
	return slices.Contains(f.Reads, name) || slices.ContainsFunc(f.ReadPrefixes, func(p string) bool { return strings.HasPrefix(name, p) })
}

// platforms are the image's architectures as Docker's platform names.
func (f imageFacts) platforms() []string {
	var out []string
	for _, a := range f.Architectures {
		out = append(out, strings.TrimSuffix(a, "v8")) // arm64v8 is linux/arm64
	}
	return out
}

// TestImageFactsTable: every image docker-compose.yml and the Dockerfile
// name has its facts, each fact a source, and nothing else is in the table.
func TestImageFactsTable(t *testing.T) {
	facts := readImageFacts(t)
	named := map[string]bool{}
	for _, image := range composeImages(t) {
		named[image] = true
		f, ok := facts[image]
		if !ok {
			t.Errorf("%s: no facts in deploy/images.json", image)
			continue
		}
		keys := strings.Join(slices.Sorted(maps.Keys(f.Sources)), ", ")
		for field, set := range map[string]bool{
			"architectures": len(f.Architectures) > 0,
			"entrypoint":    len(f.Entrypoint) > 0,
			"cmd":           len(f.Cmd) > 0,
			"user":          f.User != "",
			"workdir":       f.Workdir != "",
			"volumes":       len(f.Volumes) > 0,
			"env":           len(f.Env) > 0,
		} {
			if set && !strings.Contains(keys, field) {
				t.Errorf("%s: %s without a source (sources: %s)", image, field, keys)
			}
		}
		if !strings.Contains(keys, "architectures") {
			t.Errorf("%s: architectures without a source", image)
		}
	}
	for image := range facts {
		if !named[image] {
			t.Errorf("deploy/images.json has %s, which neither docker-compose.yml nor the Dockerfile names", image)
		}
	}
}

// serviceFacts are the facts of the image a service runs: the table's, or
// for a service built from the Dockerfile, its final stage's base image's
// with the project's own variables and commands.
func serviceFacts(t *testing.T, facts map[string]imageFacts, s types.ServiceConfig) imageFacts {
	t.Helper()
	if s.Build == nil {
		return facts[s.Image]
	}
	stages := parseDockerfile(t)
	final := stages[len(stages)-1]
	f := facts[final.BaseName]
	f.ReadPrefixes = append(slices.Clone(f.ReadPrefixes), builtImageReads...)
	f.Programs = append(slices.Clone(f.Programs), dockerfileCommands(t)...)
	return f
}

// dockerfileCommands are the project's commands the Dockerfile builds
// (./cmd/NAME), on the image's PATH.
func dockerfileCommands(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(repoPath("Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	for _, m := range regexp.MustCompile(`\./cmd/(\w+)`).FindAllStringSubmatch(string(data), -1) {
		cmds = append(cmds, m[1])
	}
	return cmds
}

// TestComposeAgainstImageFacts checks each service of docker-compose.yml,
// every profile, against its image's facts (deploy/images.json):
//   - the image runs on amd64 and arm64 (workshop laptops are both);
//   - every VOLUME it declares is covered by a tmpfs or a bind mount, so
//     docker compose down leaves no anonymous volume behind (named
//     volumes also outlive a plain down);
//   - every variable the service sets is one the image reads (or its own
//     command does), so no setting is silently ignored;
//   - every program its command and healthcheck call is in the image;
//   - every bind mount is relabelled for SELinux (z), as the images run
//     confined there. That the mounted files are readable by the images'
//     users depends on the checkout's umask: docs/compose.md says so.
func TestComposeAgainstImageFacts(t *testing.T) {
	facts := readImageFacts(t)
	p := loadCompose(t)
	for _, name := range p.ServiceNames() {
		s := p.Services[name]
		f := serviceFacts(t, facts, s)
		if f.Image == "" {
			t.Errorf("%s: no facts for %s in deploy/images.json", name, s.Image)
			continue
		}
		for _, arch := range []string{"amd64", "arm64"} {
			if !slices.Contains(f.platforms(), arch) {
				t.Errorf("%s: %s is not published for linux/%s (architectures %v)", name, f.Image, arch, f.Architectures)
			}
		}
		for _, v := range f.Volumes {
			if why := volumeLeftBehind(s, v); why != "" {
				t.Errorf("%s: %s declares VOLUME %s: %s", name, f.Image, v, why)
			}
		}
		for _, v := range slices.Sorted(maps.Keys(s.Environment)) {
			if !f.reads(v) && !referencedByService(s, v) && !(f.ReadsScriptEnv && scriptsRead(t, s, v)) {
				t.Errorf("%s: sets %s, which %s does not read (it reads %v, prefixes %v)", name, v, f.Image, f.Reads, f.ReadPrefixes)
			}
		}
		for _, prog := range servicePrograms(s, f) {
			if !slices.Contains(f.Programs, prog) {
				t.Errorf("%s: calls %s, which %s does not have (programs %v)", name, prog, f.Image, f.Programs)
			}
		}
		for _, v := range s.Volumes {
			if v.Type == types.VolumeTypeBind && (v.Bind == nil || v.Bind.SELinux != "z") {
				t.Errorf("%s: bind mount %s without :z: on an SELinux host the container may not read it", name, v.Target)
			}
		}
	}
}

// volumeLeftBehind says why the image's VOLUME target would leave a
// volume after docker compose down, or "" when it would not.
func volumeLeftBehind(s types.ServiceConfig, target string) string {
	for _, tmpfs := range s.Tmpfs {
		if path.Clean(strings.SplitN(tmpfs, ":", 2)[0]) == path.Clean(target) {
			return ""
		}
	}
	for _, v := range s.Volumes {
		if path.Clean(v.Target) != path.Clean(target) {
			continue
		}
		switch v.Type {
		case types.VolumeTypeBind, types.VolumeTypeTmpfs:
			return ""
		case types.VolumeTypeVolume:
			return "a named volume there outlives docker compose down (only down -v removes it)"
		}
	}
	return "neither tmpfs nor bind mount covers it: each up makes an anonymous volume that docker compose down keeps"
}

// referencedByService: the service's own command, entrypoint or
// healthcheck reads the variable ($NAME or ${NAME...}).
func referencedByService(s types.ServiceConfig, name string) bool {
	var text []string
	text = append(text, s.Command...)
	text = append(text, s.Entrypoint...)
	if s.HealthCheck != nil {
		text = append(text, s.HealthCheck.Test...)
	}
	return regexp.MustCompile(`\$\{?` + regexp.QuoteMeta(name) + `\b`).MatchString(strings.Join(text, " "))
}

// scriptsRead: a script under one of the service's bind mounts reads the
// variable as __ENV.NAME.
func scriptsRead(t *testing.T, s types.ServiceConfig, name string) bool {
	t.Helper()
	for _, v := range s.Volumes {
		if v.Type != types.VolumeTypeBind {
			continue
		}
		files, _ := filepath.Glob(filepath.Join(v.Source, "*.js"))
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(data), "__ENV."+name) {
				return true
			}
		}
	}
	return false
}

// servicePrograms are the programs a service's command and healthcheck
// run in its image: the command's first word when it names a program
// (no entrypoint, or one that execs its command), sh for a shell-form
// healthcheck, and the first word of each of its pipeline's commands.
func servicePrograms(s types.ServiceConfig, f imageFacts) []string {
	var progs []string
	entrypoint := f.Entrypoint
	if s.Entrypoint != nil {
		entrypoint = s.Entrypoint
	}
	if len(s.Command) > 0 && (len(entrypoint) == 0 || f.EntrypointRunsCommand && s.Entrypoint == nil) {
		progs = append(progs, s.Command[0])
	}
	if s.HealthCheck == nil || len(s.HealthCheck.Test) < 2 {
		return progs
	}
	switch test := s.HealthCheck.Test; test[0] {
	case "CMD":
		progs = append(progs, test[1])
	case "CMD-SHELL":
		progs = append(progs, "sh")
		for _, part := range regexp.MustCompile(`\|\|?|&&|;`).Split(test[1], -1) {
			if fields := strings.Fields(part); len(fields) > 0 {
				progs = append(progs, fields[0])
			}
		}
	}
	return progs
}

// TestServicePrograms: what servicePrograms reads from a command and a
// healthcheck.
func TestServicePrograms(t *testing.T) {
	for _, c := range []struct {
		name        string
		command     []string
		healthcheck []string
		f           imageFacts
		want        []string
	}{
		{"no entrypoint", []string{"/usr/local/bin/etcd", "--name"}, nil, imageFacts{}, []string{"/usr/local/bin/etcd"}},
		{"entrypoint takes arguments", []string{"run", "x.js"}, nil, imageFacts{Entrypoint: []string{"k6"}}, nil},
		{"entrypoint runs the command", []string{"sh", "-c", "x"}, nil, imageFacts{Entrypoint: []string{"/e.sh"}, EntrypointRunsCommand: true}, []string{"sh"}},
		{"exec healthcheck", nil, []string{"CMD", "wget", "-q"}, imageFacts{Entrypoint: []string{"/e.sh"}}, []string{"wget"}},
		{"shell healthcheck", nil, []string{"CMD-SHELL", "redis-cli ping | grep -q PONG && true; x || y"}, imageFacts{}, []string{"sh", "redis-cli", "grep", "true", "x", "y"}},
	} {
		var s types.ServiceConfig
		s.Command = c.command
		if c.healthcheck != nil {
			s.HealthCheck = &types.HealthCheckConfig{Test: c.healthcheck}
		}
		if got := servicePrograms(s, c.f); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestComposeZooKeeperSession: the session bounds of the zoo.cfg the
// zookeeper image's entrypoint writes from the service's environment
// (tickTime from ZOO_TICK_TIME, then each word of ZOO_CFG_EXTRA) grant
// the scenario's 1 s lease and the stage's 30 s session: a session beyond
// the bound is silently cut to it. The engine test checks the zoo.cfg the
// running container has.
func TestComposeZooKeeperSession(t *testing.T) {
	facts := readImageFacts(t)
	zk := loadCompose(t).Services["zookeeper"]
	f := facts[zk.Image]
	value := func(name string) string {
		if v, ok := zk.Environment[name]; ok && v != nil {
			return *v
		}
		return f.envDefault(name)
	}
	settings := map[string]string{"tickTime": value("ZOO_TICK_TIME")}
	for _, entry := range strings.Fields(value("ZOO_CFG_EXTRA")) {
		key, v, _ := strings.Cut(entry, "=")
		settings[key] = v
	}
	checkZooKeeperSessions(t, settings)
}

// checkZooKeeperSessions: a zoo.cfg's settings let sessions be as short as
// the scenario's 1 s lease and as long as the stage's default session
// (inventory/zookeeper.go's zkSessionTimeout, 30 s). ZooKeeper's bounds
// default to 2 and 20 ticks.
func checkZooKeeperSessions(t *testing.T, settings map[string]string) {
	t.Helper()
	ms := func(key string, ticks int) time.Duration {
		v, ok := settings[key]
		if !ok {
			tick, err := strconv.Atoi(settings["tickTime"])
			if err != nil {
				t.Fatalf("zoo.cfg tickTime %q: %v", settings["tickTime"], err)
			}
			return time.Duration(ticks*tick) * time.Millisecond
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("zoo.cfg %s=%s: %v", key, v, err)
		}
		return time.Duration(n) * time.Millisecond
	}
	if got := ms("minSessionTimeout", 2); got > time.Second {
		t.Errorf("zookeeper grants sessions of at least %s (zoo.cfg %v): the scenario's 1 s lease would be longer", got, settings)
	}
	if got := ms("maxSessionTimeout", 20); got < 30*time.Second {
		t.Errorf("zookeeper cuts sessions to %s (zoo.cfg %v): the stage's 30 s session is shortened", got, settings)
	}
}

// TestComposeGrafanaProvisioning: Grafana is given its provisioning one
// folder at a time, so the image's own folders (alerting/, plugins/, ...)
// stay; every mounted file is a provisioning file of its folder's kind
// (apiVersion 1, its list, each entry the fields Grafana needs), and the
// dashboards provider reads a mounted folder that holds the dashboard.
// Grafana itself never runs in these tests (no package of it here, no
// registry to pull it from): this is the structure only.
func TestComposeGrafanaProvisioning(t *testing.T) {
	facts := readImageFacts(t)
	g := loadCompose(t).Services["grafana"]
	f := facts[g.Image]
	const root = "/etc/grafana/provisioning"
	mounted := map[string]string{} // folder kind → host directory
	for _, v := range g.Volumes {
		target := path.Clean(v.Target)
		if v.Type != types.VolumeTypeBind || !strings.HasPrefix(target+"/", root+"/") && !strings.HasPrefix(root, target+"/") {
			continue
		}
		kind, ok := strings.CutPrefix(target, root+"/")
		if !ok || strings.Contains(kind, "/") || !slices.Contains(f.Provisioning, kind) {
			t.Errorf("grafana: bind mount at %s: want one of the image's provisioning folders %s/{%s}, not what hides the others", target, root, strings.Join(f.Provisioning, ","))
			continue
		}
		mounted[kind] = v.Source
	}
	if mounted["datasources"] == "" || mounted["dashboards"] == "" {
		t.Fatalf("grafana: provisioning folders mounted %v, want datasources and dashboards", slices.Sorted(maps.Keys(mounted)))
	}
	type provider struct {
		Name, Type string
		Options    struct{ Path string }
	}
	type datasource struct{ Name, UID, Type, URL, Access string }
	for kind, dir := range mounted {
		files, _ := filepath.Glob(filepath.Join(dir, "*"))
		if len(files) == 0 {
			t.Errorf("grafana: %s mounts an empty %s", kind, dir)
		}
		for _, file := range files {
			if ext := filepath.Ext(file); ext != ".yml" && ext != ".yaml" {
				t.Errorf("%s: Grafana reads only .yml and .yaml provisioning files", file)
				continue
			}
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var doc struct {
				APIVersion  int          `yaml:"apiVersion"`
				Providers   []provider   `yaml:"providers"`
				Datasources []datasource `yaml:"datasources"`
			}
			if err := yaml.Unmarshal(data, &doc); err != nil {
				t.Errorf("%s: %v", file, err)
				continue
			}
			if doc.APIVersion != 1 {
				t.Errorf("%s: apiVersion %d, want 1", file, doc.APIVersion)
			}
			switch kind {
			case "datasources":
				if len(doc.Datasources) == 0 || len(doc.Providers) > 0 {
					t.Errorf("%s: want a datasources list only", file)
				}
				for _, ds := range doc.Datasources {
					if ds.Name == "" || ds.UID == "" || ds.Type == "" || ds.URL == "" || ds.Access != "proxy" {
						t.Errorf("%s: datasource %+v: want name, uid, type, url and access proxy (Grafana's server queries it)", file, ds)
					}
				}
			case "dashboards":
				if len(doc.Providers) == 0 || len(doc.Datasources) > 0 {
					t.Errorf("%s: want a providers list only", file)
				}
				for _, pr := range doc.Providers {
					if pr.Name == "" || pr.Type != "file" {
						t.Errorf("%s: provider %+v: want a name and type file", file, pr)
					}
					if err := dashboardsUnder(g, pr.Options.Path); err != nil {
						t.Errorf("%s: provider %s: %v", file, pr.Name, err)
					}
				}
			}
		}
	}
}

// dashboardsUnder checks that the folder inContainer is a bind mount of
// the service holding dashboard JSON files.
func dashboardsUnder(s types.ServiceConfig, inContainer string) error {
	for _, v := range s.Volumes {
		if v.Type == types.VolumeTypeBind && path.Clean(v.Target) == path.Clean(inContainer) {
			files, _ := filepath.Glob(filepath.Join(v.Source, "*.json"))
			if len(files) == 0 {
				return fmt.Errorf("%s (%s) holds no dashboard", inContainer, v.Source)
			}
			return nil
		}
	}
	return fmt.Errorf("options.path %s is no bind mount of the service", inContainer)
}
