package deploy

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/lockstep/lockstep/nginx"
)

// nginxConfs are the nginx configurations docker-compose.yml mounts, each
// rendered for the shop services of one profile. limit-nginx.conf is the
// main stack's with limit-nginx on, mounted instead of nginx.conf when
// LOCKSTEP_NGINX_CONF names it (docs/front-door.md).
var nginxConfs = []struct {
	profile, service, path string
	limit                  *nginx.Limit
}{
	{mainStack, "nginx", "deploy/nginx/nginx.conf", nil},
	{clusterProfile, "cluster-nginx", "deploy/nginx/cluster.conf", nil},
	{mainStack, "nginx", "deploy/nginx/limit-nginx.conf", &nginx.Limit{PerBuyer: 5, BuyerBurst: 5, Global: 2000, GlobalBurst: 200}},
}

// composeNginxConf renders nginx/nginx.conf for the compose file's shop
// services of profile, as deploy/nginx/ holds it.
func composeNginxConf(t *testing.T, p *types.Project, profile string, limit *nginx.Limit) []byte {
	t.Helper()
	var upstreams []string
	for _, s := range shopServices(t, p, profile) {
		upstreams = append(upstreams, fmt.Sprintf("%s:%d", s.Name, listenPort(t, env(s, "LOCKSTEP_ADDR"))))
	}
	services := "docker-compose.yml's shop services"
	if profile != mainStack {
		services += " of the " + profile + " profile"
	}
	if limit != nil {
		services += ", limit-nginx on,"
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Generated from nginx/nginx.conf for %s by\n"+
		"# go test ./deploy -run TestGenerated -update; do not edit by hand.\n\n", services)
	if err := nginx.Render(&b, nginx.Config{Listen: "80", Upstreams: upstreams, WorkerProcesses: 2, Limit: limit}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestGenerated keeps the committed generated files equal to what their
// sources produce now.
func TestGenerated(t *testing.T) {
	dashboard, err := DashboardJSON()
	if err != nil {
		t.Fatal(err)
	}
	type generated struct {
		path string
		want []byte
	}
	files := []generated{{repoPath("grafana", "dashboards", "lockstep.json"), dashboard}}
	p := loadCompose(t)
	for _, c := range nginxConfs {
		files = append(files, generated{repoPath(c.path), composeNginxConf(t, p, c.profile, c.limit)})
	}
	for _, f := range files {
		if *update {
			if err := os.WriteFile(f.path, f.want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(f.path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, f.want) {
			t.Errorf("%s is stale: go test ./deploy -run TestGenerated -update", f.path)
		}
	}
}

func TestComposeServices(t *testing.T) {
	p := loadCompose(t)
	// Each profile's services: the main stack (no profile) is what it was
	// before the cluster profile, so an up without --profile starts nothing
	// more; the one-shot runs have a profile each, so no up starts them.
	byProfile := map[string][]string{}
	for _, name := range p.ServiceNames() {
		profiles := p.Services[name].Profiles
		if len(profiles) > 1 {
			t.Errorf("%s: profiles %v, want at most one", name, profiles)
		}
		profile := mainStack
		if len(profiles) == 1 {
			profile = profiles[0]
		}
		byProfile[profile] = append(byProfile[profile], name)
	}
	want := map[string][]string{
		mainStack: {"etcd", "grafana", "mariadb", "nginx", "nginx-exporter", "orderworker1", "orderworker2", "prometheus", "redis", "redis-exporter", "redis2", "redis3", "shop1", "shop2", "shop3", "zookeeper"},
		"loadgen": {"loadgen"},
		"k6":      {"k6"},
		clusterProfile: {"cluster-init", "cluster-nginx", "cluster-redis1", "cluster-redis2", "cluster-redis3", "cluster-redis4", "cluster-redis5", "cluster-redis6",
			"cluster-shop1", "cluster-shop2", "cluster-shop3"},
		"cluster-loadgen": {"cluster-loadgen"},
	}
	if len(byProfile) != len(want) {
		t.Errorf("profiles %v, want %v", slices.Sorted(maps.Keys(byProfile)), slices.Sorted(maps.Keys(want)))
	}
	for profile, names := range want {
		if !slices.Equal(byProfile[profile], names) {
			t.Errorf("profile %q: services %v, want %v", profile, byProfile[profile], names)
		}
	}

	// The stock's Redis and redlock's two other masters: independent, the
	// same password, no persistence.
	redisMasters := []string{"redis", "redis2", "redis3"}
	password := ""
	for _, name := range redisMasters {
		redis := p.Services[name]
		pass := ""
		if i := slices.Index(redis.Command, "--requirepass"); i >= 0 && i+1 < len(redis.Command) {
			pass = redis.Command[i+1]
		}
		if pass == "" || (password != "" && pass != password) {
			t.Errorf("%s runs with --requirepass %q, want the same password as the others: %q", name, pass, redis.Command)
		}
		password = pass
		for _, off := range []string{"--save ", "--appendonly no"} {
			if !strings.Contains(strings.Join(redis.Command, " ")+" ", off) {
				t.Errorf("%s: %q lacks %s: no persistence", name, redis.Command, off)
			}
		}
		if slices.Contains(redis.Command, "--replicaof") {
			t.Errorf("%s is a replica: redlock needs independent masters", name)
		}
	}
	for _, s := range shopServices(t, p, mainStack) {
		checkShopService(t, s, password)
		if want := "redis:6379,redis2:6379,redis3:6379"; env(s, "LOCKSTEP_REDIS_ADDR") != want {
			t.Errorf("%s: Redis %q, want %s (the stock first, redlock's three masters)", s.Name, env(s, "LOCKSTEP_REDIS_ADDR"), want)
		}
	}

	// The order workers: the stock's Redis with its password, the shops'
	// order table, a consumer name of their own each.
	for _, name := range []string{"orderworker1", "orderworker2"} {
		w := p.Services[name]
		shop := p.Services["shop1"]
		switch {
		case env(w, "LOCKSTEP_CONSUMER") != name:
			t.Errorf("%s: consumer %q, want its service name", name, env(w, "LOCKSTEP_CONSUMER"))
		case env(w, "LOCKSTEP_REDIS_ADDR") != "redis:6379" || env(w, "LOCKSTEP_REDIS_PASSWORD") != password:
			t.Errorf("%s: Redis %q password %q, want the stock's, redis:6379 with %q", name, env(w, "LOCKSTEP_REDIS_ADDR"), env(w, "LOCKSTEP_REDIS_PASSWORD"), password)
		case env(w, "LOCKSTEP_MYSQL_DSN") != env(shop, "LOCKSTEP_MYSQL_DSN"):
			t.Errorf("%s: order table %q, want the shops' %q", name, env(w, "LOCKSTEP_MYSQL_DSN"), env(shop, "LOCKSTEP_MYSQL_DSN"))
		case w.Image != "lockstep:local" || !slices.Equal(w.Command, types.ShellCommand{"orderworker"}):
			t.Errorf("%s: image %q command %q, want lockstep:local running orderworker", name, w.Image, w.Command)
		}
	}

	published := map[string]string{}
	for _, name := range p.ServiceNames() {
		for _, port := range p.Services[name].Ports {
			published[name] = fmt.Sprintf("%s:%d", port.Published, port.Target)
		}
	}
	if want := map[string]string{"nginx": "8080:80", "grafana": "3000:3000", "prometheus": "9090:9090", "cluster-nginx": "8082:80"}; !maps.Equal(published, want) {
		t.Errorf("published ports %v, want %v (docs/compose.md documents them)", published, want)
	}
	checkDocumentedPorts(t, published)

	// Start-up order: whatever a service waits for must have a healthcheck,
	// and it waits for it to be healthy, not merely started; or it is a
	// one-shot (cluster-init: no restart, no healthcheck), waited for until
	// it exited successfully.
	for _, name := range p.ServiceNames() {
		for dep, d := range p.Services[name].DependsOn {
			hc := p.Services[dep].HealthCheck
			healthchecked := hc != nil && len(hc.Test) > 0
			switch {
			case d.Condition == types.ServiceConditionCompletedSuccessfully:
				if restart := p.Services[dep].Restart; healthchecked || (restart != "" && restart != types.RestartPolicyNo) {
					t.Errorf("%s waits for %s to complete, but %s is no one-shot (healthcheck %v, restart %q)", name, dep, dep, healthchecked, restart)
				}
			case d.Condition != types.ServiceConditionHealthy:
				t.Errorf("%s depends on %s with condition %q, want service_healthy", name, dep, d.Condition)
			case !healthchecked:
				t.Errorf("%s waits for %s to be healthy, but %s has no healthcheck", name, dep, dep)
			}
		}
	}

	if !slices.Contains(p.Services["prometheus"].Command, "--web.enable-remote-write-receiver") {
		t.Error("prometheus: no --web.enable-remote-write-receiver, k6 cannot push its results")
	}
	if got := env(p.Services["k6"], "K6_PROMETHEUS_RW_SERVER_URL"); got != "http://prometheus:9090/api/v1/write" {
		t.Errorf("k6 writes to %q, want Prometheus's remote-write receiver", got)
	}
	if !slices.Contains(p.Services["k6"].Command, "experimental-prometheus-rw") {
		t.Errorf("k6 command %q sends no results to Prometheus", p.Services["k6"].Command)
	}
	if got := env(p.Services["grafana"], "GF_AUTH_ANONYMOUS_ENABLED"); got != "true" {
		t.Errorf("grafana: anonymous access %q, want true", got)
	}
	// The loadgens annotate stage runs as Grafana's admin: anonymous
	// viewers may not.
	grafana := p.Services["grafana"]
	wantURL := fmt.Sprintf("http://%s:%s@grafana:3000", env(grafana, "GF_SECURITY_ADMIN_USER"), env(grafana, "GF_SECURITY_ADMIN_PASSWORD"))
	for _, loadgen := range []string{"loadgen", "cluster-loadgen"} {
		if got := env(p.Services[loadgen], "LOCKSTEP_GRAFANA_URL"); got != wantURL || env(grafana, "GF_SECURITY_ADMIN_PASSWORD") == "" {
			t.Errorf("%s: LOCKSTEP_GRAFANA_URL %q, want Grafana's admin, %q", loadgen, got, wantURL)
		}
	}
}

// checkShopService: a shop replica is named after its service, reaches
// Redis with the Redis services' password, admin routes open to a token,
// and publishes nothing.
func checkShopService(t *testing.T, s types.ServiceConfig, password string) {
	t.Helper()
	if env(s, "LOCKSTEP_REPLICA") != s.Name {
		t.Errorf("%s: LOCKSTEP_REPLICA %q, want its service name", s.Name, env(s, "LOCKSTEP_REPLICA"))
	}
	if env(s, "LOCKSTEP_REDIS_PASSWORD") != password {
		t.Errorf("%s: Redis password %q, want the Redis services' --requirepass %q", s.Name, env(s, "LOCKSTEP_REDIS_PASSWORD"), password)
	}
	if env(s, "LOCKSTEP_ADMIN_TOKEN") == "" {
		t.Errorf("%s: no admin token: admin routes would only accept loopback clients, which nothing in compose is", s.Name)
	}
	if len(s.Ports) > 0 {
		t.Errorf("%s publishes %v: replicas (and their /metrics) are reached through nginx only", s.Name, s.Ports)
	}
	if s.Build == nil || s.Image != "lockstep:local" {
		t.Errorf("%s: want build . and image lockstep:local, got build %v image %q", s.Name, s.Build, s.Image)
	}
}

// TestComposeClusterProfile: the cluster profile's six nodes run in
// cluster mode with the main Redis's image and password (masterauth too),
// no persistence, each announcing its service name; cluster-init, the
// shops and the loadgen are all given those six; the shops use nothing of
// the main stack; the loadgen runs scenarios/shards through cluster-nginx.
func TestComposeClusterProfile(t *testing.T) {
	p := loadCompose(t)
	redis := p.Services["redis"]
	password := env(redis, "REDISCLI_AUTH")
	var nodes []string
	for _, s := range clusterNodes(p) {
		name := s.Name
		if s.Image != redis.Image {
			t.Errorf("%s: image %s, want the main Redis's %s", name, s.Image, redis.Image)
		}
		nodes = append(nodes, fmt.Sprintf("%s:6379", name))
		script := strings.Join(s.Command, " ")
		for _, want := range []string{"redis-server --cluster-enabled yes ", `--requirepass "$REDISCLI_AUTH"`, `--masterauth "$REDISCLI_AUTH"`,
			"--save '' ", "--appendonly no", `--cluster-announce-hostname "$(hostname)"`, "--cluster-preferred-endpoint-type hostname"} {
			if !strings.Contains(script+" ", want) {
				t.Errorf("%s: command %q lacks %s", name, s.Command, want)
			}
		}
		if strings.Contains(script, "--port") {
			t.Errorf("%s: command %q moves the port: the nodes listen on 6379, as LOCKSTEP_REDIS_CLUSTER and prometheus.yml say", name, s.Command)
		}
		if s.Hostname != name {
			t.Errorf("%s: hostname %q, want its service name (what it announces, what Docker's DNS resolves)", name, s.Hostname)
		}
		if env(s, "REDISCLI_AUTH") != password || password == "" {
			t.Errorf("%s: password %q, want the main Redis's %q", name, env(s, "REDISCLI_AUTH"), password)
		}
		if !slices.Contains(s.Tmpfs, "/data") {
			t.Errorf("%s: tmpfs %v, want /data: no volume left behind", name, s.Tmpfs)
		}
		if s.HealthCheck == nil || len(s.HealthCheck.Test) == 0 {
			t.Errorf("%s has no healthcheck", name)
		}
	}
	if len(nodes) != 6 {
		t.Fatalf("cluster nodes %v, want six: three masters, three replicas", nodes)
	}
	seeds := strings.Join(nodes, ",")

	init := p.Services["cluster-init"]
	if script := strings.Join(init.Command, " "); !strings.Contains(script, "redis-cli --cluster create") || !strings.Contains(script, "--cluster-replicas 1") {
		t.Errorf("cluster-init: %q does not create the cluster with a replica per master", init.Command)
	}
	if init.Image != redis.Image || env(init, "REDISCLI_AUTH") != password {
		t.Errorf("cluster-init: image %s, password %q; want redis's, %s and %q", init.Image, env(init, "REDISCLI_AUTH"), redis.Image, password)
	}
	for _, name := range []string{"cluster-init", "cluster-loadgen"} {
		if got := env(p.Services[name], "LOCKSTEP_REDIS_CLUSTER"); got != seeds {
			t.Errorf("%s: LOCKSTEP_REDIS_CLUSTER %q, want the six nodes %q", name, got, seeds)
		}
	}
	shops := shopServices(t, p, clusterProfile)
	var replicaURLs []string
	for _, s := range shops {
		checkShopService(t, s, password)
		replicaURLs = append(replicaURLs, fmt.Sprintf("http://%s:%d", s.Name, listenPort(t, env(s, "LOCKSTEP_ADDR"))))
		if got := env(s, "LOCKSTEP_REDIS_CLUSTER"); got != seeds {
			t.Errorf("%s: LOCKSTEP_REDIS_CLUSTER %q, want the six nodes %q", s.Name, got, seeds)
		}
		for _, key := range []string{"LOCKSTEP_REDIS_ADDR", "LOCKSTEP_MYSQL_DSN", "LOCKSTEP_ETCD_ENDPOINTS", "LOCKSTEP_ZOOKEEPER_SERVERS"} {
			if v := env(s, key); v != "" {
				t.Errorf("%s: %s=%s: the cluster's shops share nothing with the main stack", s.Name, key, v)
			}
		}
		for dep := range s.DependsOn {
			if !inProfile(p.Services[dep], clusterProfile) {
				t.Errorf("%s depends on %s, outside the cluster profile", s.Name, dep)
			}
		}
	}

	cmd := p.Services["cluster-loadgen"].Command
	for flag, want := range map[string]string{
		"target": "http://cluster-nginx", "replica-urls": strings.Join(replicaURLs, ","), "scenario": "shards",
	} {
		if got, _ := flagValue(cmd, flag); got != want {
			t.Errorf("cluster-loadgen: --%s=%q, want %q", flag, got, want)
		}
	}
	if _, ok := p.Services["cluster-loadgen"].DependsOn["cluster-nginx"]; !ok {
		t.Error("cluster-loadgen does not wait for cluster-nginx")
	}
}

// TestComposeMountsExist: every bind mount's source is in the repository,
// and the files the services are told to read through them are there.
func TestComposeMountsExist(t *testing.T) {
	p := loadCompose(t)
	root, _ := filepath.Abs(repo)
	// hostPath maps a path inside a container back to the repository file
	// that a bind mount puts there.
	hostPath := func(s types.ServiceConfig, inContainer string) string {
		for _, v := range s.Volumes {
			if rel, ok := strings.CutPrefix(inContainer, v.Target); ok && v.Type == types.VolumeTypeBind {
				return filepath.Join(v.Source, rel)
			}
		}
		t.Errorf("%s: %s is not under any of its bind mounts", s.Name, inContainer)
		return ""
	}
	mounts := 0
	for _, name := range p.ServiceNames() {
		s := p.Services[name]
		for _, v := range s.Volumes {
			if v.Type != types.VolumeTypeBind {
				continue
			}
			mounts++
			if !strings.HasPrefix(v.Source, root) {
				t.Errorf("%s mounts %s, outside the repository", name, v.Source)
			}
			if filepath.Dir(v.Source) == filepath.Join(root, "out") {
				continue // a loadgen's report directory, created on first run
			}
			if _, err := os.Stat(v.Source); err != nil {
				t.Errorf("%s mounts a missing %s", name, v.Source)
			}
			if !v.ReadOnly {
				t.Errorf("%s mounts %s read-write; configuration is mounted read-only", name, v.Source)
			}
		}
		if s.Build != nil {
			if _, err := os.Stat(filepath.Join(s.Build.Context, "Dockerfile")); err != nil {
				t.Errorf("%s builds %s without a Dockerfile", name, s.Build.Context)
			}
		}
	}
	if mounts < 6 {
		t.Errorf("only %d bind mounts found", mounts)
	}
	// Each nginx reads the configuration rendered for its profile's shops.
	for _, c := range nginxConfs {
		if c.limit != nil {
			continue // mounted by choice, instead of the service's own
		}
		ngx := p.Services[c.service]
		conf := regexp.MustCompile(`nginx .*-c (/\S+)`).FindStringSubmatch(strings.Join(ngx.Command, " "))
		if conf == nil {
			t.Fatalf("%s command %q names no -c config", c.service, ngx.Command)
		}
		if got, want := hostPath(ngx, conf[1]), filepath.Join(root, c.path); got != want {
			t.Errorf("%s reads %s, want %s", c.service, got, want)
		}
	}
	// Files named inside the containers.
	promConf, _ := flagValue(p.Services["prometheus"].Command, "config.file")
	grafana := p.Services["grafana"]
	k6Script := p.Services["k6"].Command[len(p.Services["k6"].Command)-1]
	for _, f := range []string{
		hostPath(p.Services["prometheus"], promConf),
		hostPath(grafana, env(grafana, "GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH")),
		hostPath(grafana, "/etc/grafana/provisioning/datasources/prometheus.yml"),
		hostPath(grafana, "/etc/grafana/provisioning/dashboards/lockstep.yml"),
		hostPath(p.Services["k6"], strings.ReplaceAll(k6Script, "${K6_SCRIPT:-spike.js}", "spike.js")),
		hostPath(p.Services["k6"], "/scripts/stage-walk.js"),
	} {
		if st, err := os.Stat(f); err != nil || st.IsDir() {
			t.Errorf("a service reads %s, which is not a file in the repository", f)
		}
	}
}

// clusterNodes are the cluster profile's redis-server services in cluster
// mode, sorted by name.
func clusterNodes(p *types.Project) []types.ServiceConfig {
	var nodes []types.ServiceConfig
	for _, name := range p.ServiceNames() {
		s := p.Services[name]
		if inProfile(s, clusterProfile) && strings.Contains(strings.Join(s.Command, " "), "redis-server --cluster-enabled yes") {
			nodes = append(nodes, s)
		}
	}
	return nodes
}

// TestPrometheusTargetsAreComposeServices: every scrape target is a compose
// service on the port it listens on, and every shop replica of the main
// stack is scraped; the cluster job finds exactly the cluster profile's
// nodes, on their port, and scrapes them through a compose service.
func TestPrometheusTargetsAreComposeServices(t *testing.T) {
	p := loadCompose(t)
	listens := map[string]int{"localhost": 9090} // Prometheus scraping itself
	for _, s := range shopServices(t, p, mainStack) {
		listens[s.Name] = listenPort(t, env(s, "LOCKSTEP_ADDR"))
	}
	nginxExporter, _ := flagValue(p.Services["nginx-exporter"].Command, "web.listen-address")
	listens["nginx-exporter"] = listenPort(t, nginxExporter)
	listens["redis-exporter"] = listenPort(t, env(p.Services["redis-exporter"], "REDIS_EXPORTER_WEB_LISTEN_ADDRESS"))

	cfg := readPrometheusConfig(t)
	scraped := map[string]bool{}
	for _, job := range cfg.ScrapeConfigs {
		for _, sc := range job.StaticConfigs {
			for _, target := range sc.Targets {
				host, port, _ := strings.Cut(target, ":")
				want, ok := listens[host]
				if !ok {
					t.Errorf("job %s scrapes %s: no such compose service", job.JobName, target)
					continue
				}
				if port != fmt.Sprint(want) {
					t.Errorf("job %s scrapes %s, but %s listens on %d", job.JobName, target, host, want)
				}
				if r := sc.Labels["replica"]; job.JobName == "shop" && r != host {
					t.Errorf("job shop: target %s has replica label %q", target, r)
				}
				scraped[host] = true
			}
		}
		if len(job.DNSSDConfigs) > 0 {
			scraped[checkClusterJob(t, p, job, listens)] = true
		}
	}
	for host := range listens {
		if !scraped[host] {
			t.Errorf("%s is not scraped", host)
		}
	}
}

// checkClusterJob: a job that finds its targets by DNS is the dashboard's
// cluster job; it resolves the cluster nodes' names, on the port they
// listen on, and sends each scrape to the exporter service it returns.
func checkClusterJob(t *testing.T, p *types.Project, job scrapeConfig, listens map[string]int) (exporter string) {
	t.Helper()
	if job.JobName != ClusterJob {
		t.Errorf("job %s finds targets by DNS; only %s (the dashboard's cluster row) should", job.JobName, ClusterJob)
	}
	var want []string
	for _, s := range clusterNodes(p) {
		want = append(want, s.Name)
	}
	var names []string
	for _, sd := range job.DNSSDConfigs {
		names = append(names, sd.Names...)
		if sd.Type != "A" || sd.Port != 6379 {
			t.Errorf("job %s: DNS type %s port %d, want A records of nodes on 6379", job.JobName, sd.Type, sd.Port)
		}
	}
	if !slices.Equal(names, want) {
		t.Errorf("job %s resolves %v, want the cluster nodes %v", job.JobName, names, want)
	}
	if job.MetricsPath != "/scrape" {
		t.Errorf("job %s: metrics_path %q, want redis_exporter's multi-target /scrape", job.JobName, job.MetricsPath)
	}
	relabelled := map[string]string{}
	for _, r := range job.RelabelConfigs {
		relabelled[r.TargetLabel] = r.Replacement
	}
	if _, ok := relabelled["__param_target"]; !ok {
		t.Errorf("job %s: no relabelling sets the target parameter: the exporter would scrape its own Redis", job.JobName)
	}
	host, port, _ := strings.Cut(relabelled["__address__"], ":")
	if listens[host] == 0 || port != fmt.Sprint(listens[host]) {
		t.Errorf("job %s scrapes through %q, want an exporter service on its port", job.JobName, relabelled["__address__"])
	}
	return host
}

// prometheusConfig is the part of prometheus.yml the checks read.
type prometheusConfig struct {
	RuleFiles     []string       `yaml:"rule_files"`
	ScrapeConfigs []scrapeConfig `yaml:"scrape_configs"`
}

type scrapeConfig struct {
	JobName       string `yaml:"job_name"`
	MetricsPath   string `yaml:"metrics_path"`
	StaticConfigs []struct {
		Targets []string          `yaml:"targets"`
		Labels  map[string]string `yaml:"labels"`
	} `yaml:"static_configs"`
	DNSSDConfigs []struct {
		Names []string `yaml:"names"`
		Type  string   `yaml:"type"`
		Port  int      `yaml:"port"`
	} `yaml:"dns_sd_configs"`
	RelabelConfigs []struct {
		SourceLabels []string `yaml:"source_labels"`
		TargetLabel  string   `yaml:"target_label"`
		Replacement  string   `yaml:"replacement"`
	} `yaml:"relabel_configs"`
}

func readPrometheusConfig(t *testing.T) prometheusConfig {
	t.Helper()
	data, err := os.ReadFile(repoPath("prometheus", "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg prometheusConfig
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestPromtool: Prometheus's own checker accepts the config and the rules,
// and the rules' unit tests (prometheus/tests/) pass.
func TestPromtool(t *testing.T) {
	promtool := tool(t, "promtool")
	rules, err := filepath.Glob(repoPath("prometheus", "rules", "*.yml"))
	if err != nil || len(rules) == 0 {
		t.Fatalf("no rule files: %v", err)
	}
	for _, args := range [][]string{
		{"check", "config", repoPath("prometheus", "prometheus.yml")},
		append([]string{"check", "rules"}, rules...),
		{"test", "rules", repoPath("prometheus", "tests", "lockstep_test.yml")},
	} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestComposeNginxConfig runs nginx -t on the configuration the nginx
// service mounts (deploy/nginx/nginx.conf and conf.d/), with the compose
// service names resolving as Docker's DNS would resolve them: nginx
// resolves upstream hosts while it checks. The names go to a private
// /etc/hosts in a mount namespace of the check's own.
func TestComposeNginxConfig(t *testing.T) {
	bin := tool(t, "nginx", "/usr/sbin")
	unshare := tool(t, "unshare")
	p := loadCompose(t)
	for _, c := range nginxConfs {
		t.Run(c.service, func(t *testing.T) {
			dir := t.TempDir()
			hosts := "127.0.0.1 localhost\n"
			var want []string
			for _, s := range shopServices(t, p, c.profile) {
				hosts += "127.0.0.1 " + s.Name + "\n"
				want = append(want, fmt.Sprintf("server %s:%d ", s.Name, listenPort(t, env(s, "LOCKSTEP_ADDR"))))
			}
			hostsFile := filepath.Join(dir, "hosts")
			if err := os.WriteFile(hostsFile, []byte(hosts), 0o644); err != nil {
				t.Fatal(err)
			}
			prefix := filepath.Join(dir, "prefix")
			for _, d := range []string{"logs", "tmp"} {
				if err := os.MkdirAll(filepath.Join(prefix, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			conf, _ := filepath.Abs(repoPath(c.path))
			script := `mount --bind "$1" /etc/hosts && exec "$2" -t -p "$3/" -c "$4" -g 'daemon off; error_log stderr warn;'`
			out, err := exec.Command(unshare, "--mount", "sh", "-c", script, "sh", hostsFile, bin, prefix, conf).CombinedOutput()
			if err != nil {
				if os.Getenv("CI") != "true" && bytes.Contains(out, []byte("unshare failed")) {
					t.Skipf("no mount namespace here: %s", out)
				}
				t.Fatalf("nginx -t on %s: %v\n%s", c.path, err, out)
			}
			if !bytes.Contains(out, []byte("test is successful")) {
				t.Fatalf("nginx -t: %s", out)
			}
			rendered, err := os.ReadFile(conf)
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range append(want, "keepalive ", "location = /metrics", "include conf.d/*.conf;") {
				if !bytes.Contains(rendered, []byte(want)) {
					t.Errorf("%s lacks %q", c.path, want)
				}
			}
		})
	}
}

// checkDocumentedPorts: the "open" tables of docs/compose.md list exactly
// the ports docker-compose.yml publishes.
func checkDocumentedPorts(t *testing.T, published map[string]string) {
	t.Helper()
	page, err := os.ReadFile(repoPath("docs", "compose.md"))
	if err != nil {
		t.Fatal(err)
	}
	var documented, publishedPorts []string
	for _, m := range regexp.MustCompile(`(?m)^\| <http://localhost:(\d+)>`).FindAllSubmatch(page, -1) {
		documented = append(documented, string(m[1]))
	}
	for _, hostToContainer := range published {
		host, _, _ := strings.Cut(hostToContainer, ":")
		publishedPorts = append(publishedPorts, host)
	}
	slices.Sort(documented)
	slices.Sort(publishedPorts)
	if !slices.Equal(documented, publishedPorts) {
		t.Errorf("docs/compose.md lists the ports %v to open, docker-compose.yml publishes %v", documented, publishedPorts)
	}
}
