package deploy

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"gopkg.in/yaml.v3"

	"github.com/lockstep/lockstep/internal/loadgen"
)

// dashboardFile is grafana/dashboards/lockstep.json as Grafana reads it:
// the committed file, not the Go value it was generated from.
type dashboardFile struct {
	UID         string `json:"uid"`
	Annotations struct {
		List []dashboardAnnotation `json:"list"`
	} `json:"annotations"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Query struct {
				Query string `json:"query"`
			} `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID      int    `json:"id"`
		Type    string `json:"type"`
		Title   string `json:"title"`
		GridPos struct {
			X, Y, W, H int
		} `json:"gridPos"`
		Targets []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

type dashboardAnnotation struct {
	Name       string         `json:"name"`
	Expr       string         `json:"expr"`
	Datasource map[string]any `json:"datasource"`
	Target     *struct {
		Type string   `json:"type"`
		Tags []string `json:"tags"`
	} `json:"target"`
}

func readDashboard(t *testing.T) (dashboardFile, []byte) {
	t.Helper()
	data, err := os.ReadFile(repoPath("grafana", "dashboards", "lockstep.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboardFile
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	return d, data
}

// panelQuery is one PromQL expression of the dashboard and where it is.
type panelQuery struct {
	panel string // panel title, or "annotation: <name>"
	expr  string
}

func dashboardQueries(t *testing.T) []panelQuery {
	t.Helper()
	d, _ := readDashboard(t)
	var qs []panelQuery
	for _, p := range d.Panels {
		for _, q := range p.Targets {
			qs = append(qs, panelQuery{p.Title, q.Expr})
		}
	}
	for _, a := range d.Annotations.List {
		if a.Datasource["type"] == grafanaDS.Type {
			continue // Grafana's own annotations: no PromQL
		}
		qs = append(qs, panelQuery{"annotation: " + a.Name, a.Expr})
	}
	return qs
}

func TestDashboardPanels(t *testing.T) {
	d, _ := readDashboard(t)
	if d.UID != DashboardUID {
		t.Errorf("uid %q, want %q", d.UID, DashboardUID)
	}
	ids := map[int]bool{}
	var titles []string
	var occupied [][24]bool // occupied[y][x] on Grafana's 24-column grid
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		g := p.GridPos
		if g.W < 1 || g.H < 1 || g.X < 0 || g.X+g.W > 24 {
			t.Errorf("%q: grid position %+v outside the 24 columns", p.Title, g)
		}
		for y := g.Y; y < g.Y+g.H; y++ {
			for len(occupied) <= y {
				occupied = append(occupied, [24]bool{})
			}
			for x := g.X; x < min(g.X+g.W, 24); x++ {
				if occupied[y][x] {
					t.Errorf("%q overlaps another panel at %d,%d", p.Title, x, y)
				}
				occupied[y][x] = true
			}
		}
		if p.Type == "row" {
			continue
		}
		titles = append(titles, p.Title)
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			if strings.TrimSpace(q.Expr) == "" {
				t.Errorf("panel %q: query %s is empty", p.Title, q.RefID)
			}
		}
	}
	// What issue 5 asks the dashboard to show.
	for _, want := range []string{
		"Sales/s by stage", "Oversold units", "Consistent (stock + sold = initial)", "Lock wait p50 / p99",
		"Lock busy/s", "Watchdog renewals and losses/s", "Foreign unlocks (since the replicas started)",
		"Sales/s per replica", "Empty segments (segmented)", "Redis commands/s",
		"EVALSHA latency (server side, mean)", "Redis connections", "k6 requests and sales/s", "k6 answers",
		// Issue 9: where one hot SKU's load lands on the cluster profile.
		"Cluster commands/s per node", "Cluster CPU per node",
	} {
		if !slices.Contains(titles, want) {
			t.Errorf("no panel %q", want)
		}
	}
	if len(d.Annotations.List) == 0 || len(d.Templating.List) == 0 {
		t.Error("want the stage annotations and the $stage variable")
	}
	// The stage runs the load generator annotates (--grafana-url).
	pushed := slices.ContainsFunc(d.Annotations.List, func(a dashboardAnnotation) bool {
		return a.Target != nil && a.Target.Type == "tags" && slices.Equal(a.Target.Tags, []string{loadgen.AnnotationTag})
	})
	if !pushed {
		t.Errorf("no annotation shows Grafana's annotations tagged %q, which the load generator pushes", loadgen.AnnotationTag)
	}
}

// TestDashboardSchema: the committed file decodes with the SDK's strict
// decoder, which refuses a field Grafana's dashboard schema lacks, a
// required one missing or a value of the wrong type.
func TestDashboardSchema(t *testing.T) {
	_, raw := readDashboard(t)
	var d dashboard.Dashboard
	err := d.UnmarshalJSONStrict(raw)
	// The decoder returns its empty error list as a non-nil error.
	if errs, ok := err.(cog.BuildErrors); ok && len(errs) == 0 {
		err = nil
	}
	if err != nil {
		t.Fatalf("grafana/dashboards/lockstep.json against Grafana's dashboard schema: %v", err)
	}
}

// TestDashboardUsesOnlyTheProvisionedDatasource walks every object of the
// dashboard JSON: each datasource reference is the provisioned Prometheus,
// but for annotations read from Grafana's own store.
func TestDashboardUsesOnlyTheProvisionedDatasource(t *testing.T) {
	data, err := os.ReadFile(repoPath("grafana", "provisioning", "datasources", "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var prov struct {
		Datasources []struct {
			UID, Type, URL string
		} `yaml:"datasources"`
	}
	if err := yaml.Unmarshal(data, &prov); err != nil {
		t.Fatal(err)
	}
	if len(prov.Datasources) != 1 || prov.Datasources[0].UID != DatasourceUID || prov.Datasources[0].URL != "http://prometheus:9090" {
		t.Fatalf("provisioned datasources %+v, want one: %s at http://prometheus:9090", prov.Datasources, DatasourceUID)
	}
	_, raw := readDashboard(t)
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	refs := 0
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, child := range v {
				if k == "datasource" {
					refs++
					ds, ok := child.(map[string]any)
					builtIn := path == "$.annotations.list[]" && ds["uid"] == grafanaDS.UID && ds["type"] == grafanaDS.Type
					if !builtIn && (!ok || ds["uid"] != prov.Datasources[0].UID || ds["type"] != prov.Datasources[0].Type) {
						t.Errorf("%s.datasource = %v, want the provisioned %s", path, child, DatasourceUID)
					}
				}
				walk(path+"."+k, child)
			}
		case []any:
			for _, child := range v {
				walk(path+"[]", child)
			}
		}
	}
	walk("$", doc)
	if refs == 0 {
		t.Fatal("no datasource reference found")
	}
}

func TestMetricNames(t *testing.T) {
	for _, c := range []struct {
		expr string
		want []string
	}{
		{`sum by (stage) (rate(lockstep_requests_total{result="sold",stage=~"$stage"}[$__rate_interval]))`, []string{"lockstep_requests_total"}},
		{`histogram_quantile(0.99, sum by (stage, le) (rate(lockstep_lock_wait_seconds_bucket{stage=~"a|b"}[1m]))) > 1`, []string{"lockstep_lock_wait_seconds_bucket"}},
		{`redis_up == 0 or up{job="redis"} == 0`, []string{"redis_up", "up"}},
		{`sum(rate(a_total[5m])) / sum(rate(b_total[5m] offset 1h))`, []string{"a_total", "b_total"}},
		{`count by (sku) (label_replace(redis_key_value{key=~"x:[{].+[}]"} == 0, "sku", "$1", "key", "(.+)"))`, []string{"redis_key_value"}},
		{`topk(5, sum without (instance) (x)) and on (job) group_left (replica) y`, []string{"x", "y"}},
		{`max(k6_http_req_duration_p99{name="deduct"}) * 1e3 + inf`, []string{"k6_http_req_duration_p99"}},
		{`vector(0) or absent(nothing_here)`, []string{"nothing_here"}},
	} {
		if got := metricNames(c.expr); !slices.Equal(got, c.want) {
			t.Errorf("metricNames(%s) = %v, want %v", c.expr, got, c.want)
		}
	}
}
