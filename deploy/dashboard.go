// Package deploy is the docker compose workshop's generated files and the
// tests that prove the compose set-up without a Docker engine: the Grafana
// dashboard (grafana/dashboards/lockstep.json, generated from this file),
// nginx/nginx.conf rendered for the compose services (deploy/nginx/), and
// checks of every file the compose file mounts with the real tool that reads
// it: compose-go, nginx -t, promtool, a live Prometheus and k6.
//
// Regenerate after editing: go test ./deploy -run TestGenerated -update
package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/lockstep/lockstep/internal/loadgen"
)

// DatasourceUID is the provisioned Prometheus datasource
// (grafana/provisioning/datasources/prometheus.yml), the only one the
// dashboard uses.
const DatasourceUID = "lockstep-prometheus"

// DashboardUID is the lockstep dashboard's stable uid (its URL is
// /d/lockstep).
const DashboardUID = "lockstep"

// Dashboard is the subset of Grafana's dashboard JSON model the lockstep
// dashboard uses.
type Dashboard struct {
	UID           string      `json:"uid"`
	Title         string      `json:"title"`
	Description   string      `json:"description"`
	Tags          []string    `json:"tags"`
	Timezone      string      `json:"timezone"`
	Editable      bool        `json:"editable"`
	GraphTooltip  int         `json:"graphTooltip"`
	Refresh       string      `json:"refresh"`
	SchemaVersion int         `json:"schemaVersion"`
	Version       int         `json:"version"`
	Time          TimeRange   `json:"time"`
	Templating    Templating  `json:"templating"`
	Annotations   Annotations `json:"annotations"`
	Panels        []Panel     `json:"panels"`
}

// TimeRange is the dashboard's default time range.
type TimeRange struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// Templating holds the dashboard's variables.
type Templating struct {
	List []Variable `json:"list"`
}

// Variable is a query variable (label_values of a metric).
type Variable struct {
	Name       string         `json:"name"`
	Label      string         `json:"label"`
	Type       string         `json:"type"`
	Datasource Datasource     `json:"datasource"`
	Query      VariableQuery  `json:"query"`
	Definition string         `json:"definition"`
	Refresh    int            `json:"refresh"`
	Multi      bool           `json:"multi"`
	IncludeAll bool           `json:"includeAll"`
	AllValue   string         `json:"allValue"`
	Current    map[string]any `json:"current"`
	Sort       int            `json:"sort"`
}

// VariableQuery is a Prometheus variable query.
type VariableQuery struct {
	Query string `json:"query"`
	RefID string `json:"refId"`
}

// Annotations holds the dashboard's annotation queries.
type Annotations struct {
	List []Annotation `json:"list"`
}

// Annotation is an annotation query: a Prometheus one (Expr: every step
// where it has a value marks the time line; consecutive steps merge into a
// region) or one of Grafana's own annotations (Target: those with tags).
type Annotation struct {
	Name        string            `json:"name"`
	Datasource  Datasource        `json:"datasource"`
	Enable      bool              `json:"enable"`
	IconColor   string            `json:"iconColor"`
	Expr        string            `json:"expr,omitempty"`
	Step        string            `json:"step,omitempty"`
	TitleFormat string            `json:"titleFormat,omitempty"`
	TagKeys     string            `json:"tagKeys,omitempty"`
	TextFormat  string            `json:"textFormat,omitempty"`
	Target      *AnnotationTarget `json:"target,omitempty"`
}

// AnnotationTarget selects Grafana's own annotations by tag.
type AnnotationTarget struct {
	Type     string   `json:"type"` // "tags"
	Tags     []string `json:"tags"`
	MatchAny bool     `json:"matchAny"`
	Limit    int      `json:"limit"`
}

// Datasource references a datasource by type and uid.
type Datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// Panel is a row, a time series or a stat panel.
type Panel struct {
	ID          int          `json:"id"`
	Type        string       `json:"type"`
	Title       string       `json:"title"`
	Description string       `json:"description,omitempty"`
	GridPos     GridPos      `json:"gridPos"`
	Datasource  *Datasource  `json:"datasource,omitempty"`
	Targets     []Target     `json:"targets,omitempty"`
	FieldConfig *FieldConfig `json:"fieldConfig,omitempty"`
	Options     any          `json:"options,omitempty"`
	Collapsed   *bool        `json:"collapsed,omitempty"`
	Panels      []Panel      `json:"panels,omitempty"` // a row's panels when collapsed; always empty here
}

// GridPos places a panel on Grafana's 24-column grid.
type GridPos struct {
	X int `json:"x"`
	Y int `json:"y"`
	W int `json:"w"`
	H int `json:"h"`
}

// Target is one PromQL query of a panel.
type Target struct {
	RefID        string     `json:"refId"`
	Datasource   Datasource `json:"datasource"`
	Expr         string     `json:"expr"`
	LegendFormat string     `json:"legendFormat"`
	Range        bool       `json:"range"`
	Instant      bool       `json:"instant"`
}

// FieldConfig sets a panel's unit, thresholds and value mappings.
type FieldConfig struct {
	Defaults  FieldDefaults `json:"defaults"`
	Overrides []any         `json:"overrides"`
}

// FieldDefaults are the field settings every series of a panel shares.
type FieldDefaults struct {
	Unit       string         `json:"unit,omitempty"`
	Decimals   *int           `json:"decimals,omitempty"`
	Min        *float64       `json:"min,omitempty"`
	Color      map[string]any `json:"color,omitempty"`
	Thresholds *Thresholds    `json:"thresholds,omitempty"`
	Mappings   []any          `json:"mappings,omitempty"`
	Custom     map[string]any `json:"custom,omitempty"`
}

// Thresholds colour values: each step applies from its value up.
type Thresholds struct {
	Mode  string          `json:"mode"`
	Steps []ThresholdStep `json:"steps"`
}

// ThresholdStep is one colour from Value up; a nil Value is the base.
type ThresholdStep struct {
	Color string   `json:"color"`
	Value *float64 `json:"value"`
}

var prometheusDS = Datasource{Type: "prometheus", UID: DatasourceUID}

// grafanaDS is Grafana's built-in annotation store, not a datasource one
// provisions.
var grafanaDS = Datasource{Type: "grafana", UID: "-- Grafana --"}

// stageFilter restricts a selector to the stages picked in the $stage
// variable.
const stageFilter = `stage=~"$stage"`

// ClusterJob is prometheus.yml's job that scrapes the cluster profile's
// Redis nodes; the Redis Cluster row selects it.
const ClusterJob = "redis-cluster"

// clusterFilter restricts a selector to the cluster profile's nodes.
const clusterFilter = `job="` + ClusterJob + `"`

// panel kinds the layout places.
type panelSpec struct {
	kind        string // "timeseries" or "stat"
	title       string
	description string
	width       int
	height      int
	unit        string
	targets     []Target
	fields      func(*FieldDefaults)
}

// rowSpec is a dashboard row: its title and its panels, laid out left to
// right.
type rowSpec struct {
	title  string
	panels []panelSpec
}

func query(expr, legend string) Target {
	return Target{Datasource: prometheusDS, Expr: expr, LegendFormat: legend, Range: true}
}

func float(v float64) *float64 { return &v }
func integer(v int) *int       { return &v }

// redAbove colours a stat green at 0 and red from 1 up.
func redAbove(d *FieldDefaults) {
	d.Decimals = integer(0)
	d.Color = map[string]any{"mode": "thresholds"}
	d.Thresholds = &Thresholds{Mode: "absolute", Steps: []ThresholdStep{{Color: "green"}, {Color: "red", Value: float(1)}}}
}

// yesNo shows 1 as a green "yes" and 0 as a red "no".
func yesNo(d *FieldDefaults) {
	d.Decimals = integer(0)
	d.Color = map[string]any{"mode": "thresholds"}
	d.Thresholds = &Thresholds{Mode: "absolute", Steps: []ThresholdStep{{Color: "red"}, {Color: "green", Value: float(1)}}}
	d.Mappings = []any{map[string]any{"type": "value", "options": map[string]any{
		"0": map[string]any{"text": "no", "color": "red", "index": 0},
		"1": map[string]any{"text": "yes", "color": "green", "index": 1},
	}}}
}

func statOptions() map[string]any {
	return map[string]any{
		"reduceOptions": map[string]any{"calcs": []string{"lastNotNull"}, "fields": "", "values": false},
		"colorMode":     "background",
		"graphMode":     "none",
		"textMode":      "value_and_name",
		"justifyMode":   "auto",
		"orientation":   "auto",
	}
}

func timeseriesOptions() map[string]any {
	return map[string]any{
		"legend":  map[string]any{"displayMode": "list", "placement": "bottom", "showLegend": true},
		"tooltip": map[string]any{"mode": "multi", "sort": "desc"},
	}
}

// rows is the dashboard's content, top to bottom.
func rows() []rowSpec {
	rate := func(selector string) string { return fmt.Sprintf("rate(%s[$__rate_interval])", selector) }
	quantile := func(q, metric string) string {
		return fmt.Sprintf("histogram_quantile(%s, sum by (stage, le) (%s))", q, rate(metric+`_bucket{`+stageFilter+`}`))
	}
	return []rowSpec{
		{"Stages: what each lock costs and whether it oversells", []panelSpec{
			{kind: "stat", title: "Oversold units", width: 8, height: 5, fields: redAbove,
				description: "max(0, sold - initial) from the audit in Redis, per stage. Red: the stage sold units it did not have (LockstepOversold fires).",
				targets:     []Target{query(`max by (stage) (lockstep_oversold{`+stageFilter+`})`, "{{stage}}")}},
			{kind: "stat", title: "Consistent (stock + sold = initial)", width: 8, height: 5, fields: yesNo,
				description: "no: lost updates, two SETs wrote over each other.",
				targets:     []Target{query(`min by (stage) (lockstep_consistent{`+stageFilter+`})`, "{{stage}}")}},
			{kind: "stat", title: "Stock left", width: 8, height: 5,
				description: "Units left per stage, from the audit in Redis.",
				fields: func(d *FieldDefaults) {
					d.Decimals = integer(0)
					d.Color = map[string]any{"mode": "fixed", "fixedColor": "blue"}
				},
				targets: []Target{query(`sum by (stage) (max by (stage, sku) (lockstep_stock{`+stageFilter+`}))`, "{{stage}}")}},
			{kind: "timeseries", title: "Sales/s by stage", width: 12, height: 8, unit: "reqps",
				description: "Deduct requests answered 200, over every replica.",
				targets:     []Target{query(`sum by (stage) (`+rate(`lockstep_requests_total{result="sold",`+stageFilter+`}`)+`)`, "{{stage}}")}},
			{kind: "timeseries", title: "Answers/s by result", width: 12, height: 8, unit: "reqps",
				description: "sold (200), sold_out (409), lock_busy (423: fail-fast locks, or the wait budget spent), error.",
				targets:     []Target{query(`sum by (stage, result) (`+rate(`lockstep_requests_total{`+stageFilter+`}`)+`)`, "{{stage}} {{result}}")}},
			{kind: "timeseries", title: "Lock wait p50 / p99", width: 12, height: 8, unit: "s",
				description: "Time spent acquiring the stage's lock, whatever the outcome.",
				targets: []Target{
					query(quantile("0.5", "lockstep_lock_wait_seconds"), "{{stage}} p50"),
					query(quantile("0.99", "lockstep_lock_wait_seconds"), "{{stage}} p99"),
				}},
			{kind: "timeseries", title: "Lock busy/s", width: 12, height: 8, unit: "reqps",
				description: "Acquisitions that gave up: the lock was held (fail-fast stages) or the wait budget ran out.",
				targets:     []Target{query(`sum by (stage) (`+rate(`lockstep_lock_acquisitions_total{result="busy",`+stageFilter+`}`)+`)`, "{{stage}}")}},
			{kind: "timeseries", title: "Watchdog renewals and losses/s", width: 12, height: 8, unit: "ops",
				description: "renewed: the watchdog extended a held lease (every lease/3); lost: the lock was gone when it tried; error: Redis failed.",
				targets:     []Target{query(`sum by (stage, result) (`+rate(`lockstep_watchdog_renewals_total{`+stageFilter+`}`)+`)`, "{{stage}} {{result}}")}},
			{kind: "timeseries", title: "Foreign unlocks (since the replicas started)", width: 12, height: 8, unit: "short",
				description: "A release deleted a lock another request held (setnx-expire's plain DEL after its TTL ran out).",
				targets:     []Target{query(`sum by (stage) (lockstep_foreign_unlocks_total{`+stageFilter+`})`, "{{stage}}")}},
			{kind: "timeseries", title: "Sales/s per replica", width: 12, height: 8, unit: "reqps",
				description: "How nginx spreads the sales of the selected stages over the replicas.",
				targets:     []Target{query(`sum by (replica) (`+rate(`lockstep_requests_total{result="sold",`+stageFilter+`}`)+`)`, "{{replica}}")}},
			{kind: "timeseries", title: "Empty segments (segmented)", width: 12, height: 8, unit: "short",
				description: "Segments of the segmented stage whose stock is 0, from the audit in Redis: sales fall back to the other segments.",
				targets:     []Target{query(`max by (stage, sku) (lockstep_segments_empty{`+stageFilter+`})`, "{{sku}} empty")}},
			{kind: "timeseries", title: "Request duration p99", width: 12, height: 8, unit: "s",
				description: "Whole deduct requests as the replicas timed them.",
				targets:     []Target{query(quantile("0.99", "lockstep_request_duration_seconds"), "{{stage}}")}},
		}},
		{"Orders (the order stages: one order per buyer, optimistic locks)", []panelSpec{
			{kind: "timeseries", title: "Orders/s by stage", width: 8, height: 8, unit: "ops",
				description: "Orders written per second, from each order stage's order table (every replica reports the same table).",
				targets:     []Target{query(`max by (stage) (deriv(lockstep_orders{`+stageFilter+`}[$__rate_interval]))`, "{{stage}}")}},
			{kind: "stat", title: "Duplicate orders", width: 8, height: 8, fields: redAbove,
				description: "Orders beyond each buyer's first. Red on a one-per-user stage: its check did not hold (一人一单 broken); the optimistic stages promise nothing per buyer.",
				targets:     []Target{query(`max by (stage) (lockstep_duplicate_orders{`+stageFilter+`})`, "{{stage}}")}},
			{kind: "stat", title: "Undersold units", width: 8, height: 8, fields: redAbove,
				description: "少卖: units gone from the stock that no order holds: initial - remaining - units ordered (a replica killed between the deduction and the order insert, a database that could not be told to void an order).",
				targets:     []Target{query(`max by (stage) (lockstep_undersold{`+stageFilter+`})`, "{{stage}}")}},
		}},
		{"Asynchronous orders (the async stages: a Redis Stream and its order workers)", []panelSpec{
			{kind: "timeseries", title: "Stream: undelivered and pending", width: 6, height: 8, unit: "short",
				description: "Entries no worker read yet, and entries read but not acknowledged. Pending that only grows: a consumer acknowledging the wrong key (async-wrong-ack), or a dead worker nobody claims from (async-no-claim).",
				targets: []Target{
					query(`max by (stage) (lockstep_stream_undelivered{`+stageFilter+`})`, "{{stage}} undelivered"),
					query(`max by (stage) (lockstep_stream_pending{`+stageFilter+`})`, "{{stage}} pending"),
				}},
			{kind: "timeseries", title: "Oldest pending entry", width: 6, height: 8, unit: "s",
				description: "Age of the oldest entry read and not acknowledged (0: none). It climbs while a dead worker's entries wait for a claim (claim-idle), and without bound when nobody claims them.",
				targets:     []Target{query(`max by (stage) (lockstep_stream_oldest_pending_seconds{`+stageFilter+`})`, "{{stage}}")}},
			{kind: "timeseries", title: "Order lag p50 / p99", width: 6, height: 8, unit: "s",
				description: "From a sale's 200 to its order row, over the last orders the workers wrote: how far the order table trails the sale.",
				targets:     []Target{query(`max by (stage, quantile) (lockstep_order_lag_seconds{`+stageFilter+`})`, "{{stage}} q{{quantile}}")}},
			{kind: "stat", title: "Dead letters", width: 6, height: 8, fields: redAbove,
				description: "Entries moved to the dead-letter stream: refused by the order database too often (an error about the row, never an outage), a buyer with another order, or malformed; an admitted order's unit went back on sale.",
				targets:     []Target{query(`max by (stage) (lockstep_dead_letters{`+stageFilter+`})`, "{{stage}}")}},
		}},
		{"Redis", []panelSpec{
			{kind: "timeseries", title: "Redis commands/s", width: 8, height: 8, unit: "ops",
				targets: []Target{
					query(`sum(`+rate(`redis_commands_processed_total`)+`)`, "all"),
					query(`topk(5, sum by (cmd) (`+rate(`redis_commands_total`)+`))`, "{{cmd}}"),
				}},
			{kind: "timeseries", title: "EVALSHA latency (server side, mean)", width: 8, height: 8, unit: "s",
				description: "Time Redis spends in each EVALSHA: the lock and stock Lua scripts.",
				targets:     []Target{query(`sum(`+rate(`redis_commands_duration_seconds_total{cmd="evalsha"}`)+`) / sum(`+rate(`redis_commands_total{cmd="evalsha"}`)+`)`, "evalsha")}},
			{kind: "timeseries", title: "Redis connections", width: 8, height: 8, unit: "short",
				description: "Clients connected (the replicas' pools, their pub/sub connections) and clients blocked.",
				targets: []Target{
					query(`sum(redis_connected_clients)`, "connected"),
					query(`sum(redis_blocked_clients)`, "blocked"),
				}},
		}},
		{"Redis Cluster (docker compose --profile cluster): where one hot SKU's load lands", []panelSpec{
			{kind: "timeseries", title: "Cluster commands/s per node", width: 12, height: 8, unit: "ops",
				description: "Commands each node processed (scripts' own included), its role beside its name. " +
					"A stage whose keys share one slot (watchdog, atomic) piles on one master; the segmented stages spread over all three. " +
					"A replica processes what its master replicates to it.",
				targets: []Target{query(withRole(`sum by (instance) (`+rate(`redis_commands_processed_total{`+clusterFilter+`}`)+`)`), "{{instance}} {{role}}")}},
			{kind: "timeseries", title: "Cluster CPU per node", width: 12, height: 8, unit: "short",
				description: "Cores each node's redis-server used (system + user; 1 = one core): one master near a core bounds one hot key whatever the cluster's size.",
				targets: []Target{query(withRole(`sum by (instance) (`+rate(`redis_cpu_sys_seconds_total{`+clusterFilter+`}`)+
					` + `+rate(`redis_cpu_user_seconds_total{`+clusterFilter+`}`)+`)`), "{{instance}} {{role}}")}},
		}},
		{"nginx", []panelSpec{
			{kind: "timeseries", title: "nginx requests/s", width: 12, height: 7, unit: "reqps",
				targets: []Target{query(`sum(`+rate(`nginx_http_requests_total`)+`)`, "requests")}},
			{kind: "timeseries", title: "nginx connections", width: 12, height: 7, unit: "short",
				description: "active: client connections open now; waiting: idle keep-alive ones among them.",
				targets: []Target{
					query(`sum(nginx_connections_active)`, "active"),
					query(`sum(nginx_connections_waiting)`, "waiting"),
				}},
		}},
		{"k6 (when it runs: docker compose --profile k6 run --rm k6)", []panelSpec{
			{kind: "timeseries", title: "k6 requests and sales/s", width: 6, height: 8, unit: "reqps",
				description: "What k6 measured, pushed by remote write: every request, and the sales (200) among them.",
				targets: []Target{
					query(`sum(`+rate(`k6_http_reqs_total{name="deduct"}`)+`)`, "requests"),
					query(`sum(`+rate(`k6_sales_total`)+`)`, "sales"),
				}},
			{kind: "timeseries", title: "k6 answers", width: 6, height: 8, unit: "short",
				description: "Answers k6 counted since the run began: sales (200), sold out (409), lock busy (423).",
				targets: []Target{
					query(`sum(k6_sales_total)`, "sales"),
					query(`sum(k6_sold_out_total)`, "sold out"),
					query(`sum(k6_lock_busy_total)`, "lock busy"),
				}},
			{kind: "timeseries", title: "k6 deduct latency", width: 6, height: 8, unit: "s",
				targets: []Target{
					query(`max(k6_http_req_duration_p50{name="deduct"})`, "p50"),
					query(`max(k6_http_req_duration_p99{name="deduct"})`, "p99"),
				}},
			{kind: "timeseries", title: "k6 VUs", width: 6, height: 8, unit: "short",
				description: "VUs busy and allocated. When every allocated VU is busy, the open model drops buyers (k6's summary counts them as dropped_iterations).",
				targets: []Target{
					query(`sum(k6_vus)`, "busy"),
					query(`sum(k6_vus_max)`, "allocated"),
				}},
		}},
	}
}

// withRole labels a per-node expression with each node's role (master, or
// slave as Redis calls a replica), from redis_exporter's
// redis_instance_info.
func withRole(expr string) string {
	return expr + ` * on (instance) group_left (role) max by (instance, role) (redis_instance_info{` + clusterFilter + `})`
}

// NewDashboard builds the lockstep dashboard.
func NewDashboard() Dashboard {
	d := Dashboard{
		UID:           DashboardUID,
		Title:         "lockstep",
		Description:   "Redis distributed locks on a flash sale: per stage, sales/s, oversold units and what the lock costs.",
		Tags:          []string{"lockstep"},
		Timezone:      "browser",
		GraphTooltip:  1,
		Refresh:       "5s",
		SchemaVersion: 39,
		Version:       1,
		Time:          TimeRange{From: "now-15m", To: "now"},
		Templating: Templating{List: []Variable{{
			Name: "stage", Label: "stage", Type: "query", Datasource: prometheusDS,
			Query:      VariableQuery{Query: "label_values(lockstep_requests_total, stage)", RefID: "stage"},
			Definition: "label_values(lockstep_requests_total, stage)",
			Refresh:    2, Multi: true, IncludeAll: true, AllValue: ".*", Sort: 0,
			Current: map[string]any{"selected": true, "text": []string{"All"}, "value": []string{"$__all"}},
		}}},
		Annotations: Annotations{List: []Annotation{{
			// The load generator walks the stages one after the other; a
			// stage's region is the time its deducts arrive.
			Name: "Stage runs", Datasource: prometheusDS, Enable: true, IconColor: "rgba(255, 176, 0, 0.5)",
			Expr: `sum by (stage) (rate(lockstep_requests_total[$__rate_interval])) > 0`, Step: "5s",
			TitleFormat: "{{stage}}", TagKeys: "stage", TextFormat: "stage {{stage}} under load",
		}, {
			// Pushed by the load generator (--grafana-url) after each stage
			// run: its span and figures (sales, sales/s, oversold,
			// consistent).
			Name: "Load generator stage runs", Datasource: grafanaDS, Enable: true, IconColor: "rgba(0, 211, 255, 0.5)",
			Target: &AnnotationTarget{Type: "tags", Tags: []string{loadgen.AnnotationTag}, Limit: 100},
		}}},
	}
	id, y := 1, 0
	for _, row := range rows() {
		collapsed := false
		d.Panels = append(d.Panels, Panel{ID: id, Type: "row", Title: row.title, GridPos: GridPos{Y: y, W: 24, H: 1}, Collapsed: &collapsed})
		id++
		y++
		x, rowHeight := 0, 0
		for _, p := range row.panels {
			if x+p.width > 24 {
				x, y, rowHeight = 0, y+rowHeight, 0
			}
			targets := make([]Target, len(p.targets))
			for i, t := range p.targets {
				t.RefID = string(rune('A' + i))
				targets[i] = t
			}
			fc := &FieldConfig{Defaults: FieldDefaults{Unit: p.unit}, Overrides: []any{}}
			if p.kind == "timeseries" {
				fc.Defaults.Min = float(0)
				fc.Defaults.Custom = map[string]any{"drawStyle": "line", "lineWidth": 1, "fillOpacity": 10, "showPoints": "never", "spanNulls": false}
			}
			if p.fields != nil {
				p.fields(&fc.Defaults)
			}
			options := statOptions()
			if p.kind == "timeseries" {
				options = timeseriesOptions()
			}
			ds := prometheusDS
			d.Panels = append(d.Panels, Panel{
				ID: id, Type: p.kind, Title: p.title, Description: p.description,
				GridPos:    GridPos{X: x, Y: y, W: p.width, H: p.height},
				Datasource: &ds, Targets: targets, FieldConfig: fc, Options: options,
			})
			id++
			x += p.width
			rowHeight = max(rowHeight, p.height)
		}
		y += rowHeight
	}
	return d
}

// DashboardJSON is grafana/dashboards/lockstep.json: NewDashboard
// indented, without HTML escaping so PromQL stays readable.
func DashboardJSON() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(NewDashboard()); err != nil {
		return nil, fmt.Errorf("encode dashboard: %w", err)
	}
	return b.Bytes(), nil
}
