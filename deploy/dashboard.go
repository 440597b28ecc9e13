// Package deploy is the docker compose workshop's generated files and the
// tests that prove the compose set-up without a Docker engine: the Grafana
// dashboard (grafana/dashboards/lockstep.json, built from this file with
// Grafana's Go SDK, grafana-foundation-sdk), nginx/nginx.conf rendered for
// the compose services (deploy/nginx/), and checks of every file the
// compose file mounts with the real tool that reads it: compose-go,
// nginx -t, promtool, a live Prometheus and k6.
//
// Regenerate after editing: go test ./deploy -run TestGenerated -update
package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"

	"github.com/lockstep/lockstep/internal/loadgen"
)

// DatasourceUID is the provisioned Prometheus datasource
// (grafana/provisioning/datasources/prometheus.yml), the only one the
// dashboard uses.
const DatasourceUID = "lockstep-prometheus"

// DashboardUID is the lockstep dashboard's stable uid (its URL is
// /d/lockstep).
const DashboardUID = "lockstep"

// datasource references a datasource by type and uid.
type datasource struct {
	Type, UID string
}

func (d datasource) ref() common.DataSourceRef {
	return common.DataSourceRef{Type: &d.Type, Uid: &d.UID}
}

var prometheusDS = datasource{Type: "prometheus", UID: DatasourceUID}

// grafanaDS is Grafana's built-in annotation store, not a datasource one
// provisions.
var grafanaDS = datasource{Type: "grafana", UID: "-- Grafana --"}

// stageFilter restricts a selector to the stages picked in the $stage
// variable.
const stageFilter = `stage=~"$stage"`

// ClusterJob is prometheus.yml's job that scrapes the cluster profile's
// Redis nodes; the Redis Cluster row selects it.
const ClusterJob = "redis-cluster"

// clusterFilter restricts a selector to the cluster profile's nodes.
const clusterFilter = `job="` + ClusterJob + `"`

// panelSpec is one panel of a row: what it shows, its size, its queries.
type panelSpec struct {
	kind        string // "timeseries" or "stat"
	title       string
	description string
	width       int
	height      int
	unit        string
	targets     []target
	fields      func(*stat.PanelBuilder) // a stat's colours and mappings
}

// rowSpec is a dashboard row: its title and its panels, laid out left to
// right.
type rowSpec struct {
	title  string
	panels []panelSpec
}

// target is one PromQL query of a panel and its series' legend.
type target struct {
	expr, legend string
}

func query(expr, legend string) target { return target{expr: expr, legend: legend} }

// redAbove colours a stat green at 0 and red from 1 up.
func redAbove(p *stat.PanelBuilder) {
	p.Decimals(0).
		ColorScheme(dashboard.NewFieldColorBuilder().Mode(dashboard.FieldColorModeIdThresholds)).
		Thresholds(dashboard.NewThresholdsConfigBuilder().Mode(dashboard.ThresholdsModeAbsolute).
			Steps([]dashboard.Threshold{{Color: "green"}, {Color: "red", Value: cog.ToPtr(1.0)}}))
}

// yesNo shows 1 as a green "yes" and 0 as a red "no".
func yesNo(p *stat.PanelBuilder) {
	p.Decimals(0).
		ColorScheme(dashboard.NewFieldColorBuilder().Mode(dashboard.FieldColorModeIdThresholds)).
		Thresholds(dashboard.NewThresholdsConfigBuilder().Mode(dashboard.ThresholdsModeAbsolute).
			Steps([]dashboard.Threshold{{Color: "red"}, {Color: "green", Value: cog.ToPtr(1.0)}})).
		Mappings([]dashboard.ValueMapping{{ValueMap: &dashboard.ValueMap{
			Type: dashboard.MappingTypeValueToText,
			Options: map[string]dashboard.ValueMappingResult{
				"0": {Text: cog.ToPtr("no"), Color: cog.ToPtr("red"), Index: cog.ToPtr[int32](0)},
				"1": {Text: cog.ToPtr("yes"), Color: cog.ToPtr("green"), Index: cog.ToPtr[int32](1)},
			},
		}}})
}

// fixedBlue shows a count in one neutral colour.
func fixedBlue(p *stat.PanelBuilder) {
	p.Decimals(0).ColorScheme(dashboard.NewFieldColorBuilder().Mode(dashboard.FieldColorModeIdFixed).FixedColor("blue"))
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
				targets:     []target{query(`max by (stage) (lockstep_oversold{`+stageFilter+`})`, "{{stage}}")}},
			{kind: "stat", title: "Consistent (stock + sold = initial)", width: 8, height: 5, fields: yesNo,
				description: "no: lost updates, two SETs wrote over each other.",
				targets:     []target{query(`min by (stage) (lockstep_consistent{`+stageFilter+`})`, "{{stage}}")}},
			{kind: "stat", title: "Stock left", width: 8, height: 5,
				description: "Units left per stage, from the audit in Redis.",
				fields:      fixedBlue,
				targets:     []target{query(`sum by (stage) (max by (stage, sku) (lockstep_stock{`+stageFilter+`}))`, "{{stage}}")}},
			{kind: "timeseries", title: "Sales/s by stage", width: 12, height: 8, unit: "reqps",
				description: "Deduct requests answered 200, over every replica.",
				targets:     []target{query(`sum by (stage) (`+rate(`lockstep_requests_total{result="sold",`+stageFilter+`}`)+`)`, "{{stage}}")}},
			{kind: "timeseries", title: "Answers/s by result", width: 12, height: 8, unit: "reqps",
				description: "sold (200), sold_out (409), lock_busy (423: fail-fast locks, or the wait budget spent), error.",
				targets:     []target{query(`sum by (stage, result) (`+rate(`lockstep_requests_total{`+stageFilter+`}`)+`)`, "{{stage}} {{result}}")}},
			{kind: "timeseries", title: "Lock wait p50 / p99", width: 12, height: 8, unit: "s",
				description: "Time spent acquiring the stage's lock, whatever the outcome.",
				targets: []target{
					query(quantile("0.5", "lockstep_lock_wait_seconds"), "{{stage}} p50"),
					query(quantile("0.99", "lockstep_lock_wait_seconds"), "{{stage}} p99"),
				}},
			{kind: "timeseries", title: "Lock busy/s", width: 12, height: 8, unit: "reqps",
				description: "Acquisitions that gave up: the lock was held (fail-fast stages) or the wait budget ran out.",
				targets:     []target{query(`sum by (stage) (`+rate(`lockstep_lock_acquisitions_total{result="busy",`+stageFilter+`}`)+`)`, "{{stage}}")}},
			{kind: "timeseries", title: "Watchdog renewals and losses/s", width: 12, height: 8, unit: "ops",
				description: "renewed: the watchdog extended a held lease (every lease/3); lost: the lock was gone when it tried; error: Redis failed.",
				targets:     []target{query(`sum by (stage, result) (`+rate(`lockstep_watchdog_renewals_total{`+stageFilter+`}`)+`)`, "{{stage}} {{result}}")}},
			{kind: "timeseries", title: "Foreign unlocks (since the replicas started)", width: 12, height: 8, unit: "short",
				description: "A release deleted a lock another request held (setnx-expire's plain DEL after its TTL ran out).",
				targets:     []target{query(`sum by (stage) (lockstep_foreign_unlocks_total{`+stageFilter+`})`, "{{stage}}")}},
			{kind: "timeseries", title: "Sales/s per replica", width: 12, height: 8, unit: "reqps",
				description: "How nginx spreads the sales of the selected stages over the replicas.",
				targets:     []target{query(`sum by (replica) (`+rate(`lockstep_requests_total{result="sold",`+stageFilter+`}`)+`)`, "{{replica}}")}},
			{kind: "timeseries", title: "Empty segments (segmented)", width: 12, height: 8, unit: "short",
				description: "Segments of the segmented stage whose stock is 0, from the audit in Redis: sales fall back to the other segments.",
				targets:     []target{query(`max by (stage, sku) (lockstep_segments_empty{`+stageFilter+`})`, "{{sku}} empty")}},
			{kind: "timeseries", title: "Request duration p99", width: 12, height: 8, unit: "s",
				description: "Whole deduct requests as the replicas timed them.",
				targets:     []target{query(quantile("0.99", "lockstep_request_duration_seconds"), "{{stage}}")}},
		}},
		{"Front door (docs/front-door.md): the limiter's refusals and the sold-out mark, per replica", []panelSpec{
			{kind: "timeseries", title: "Limiter refusals/s per replica", width: 8, height: 8, unit: "reqps",
				description: "429 rate_limited by the limit that refused (buyer, global), and 503 when limit-redis could not decide (unavailable); 0 on a replica without a limiter. limit-nginx refuses in nginx: its refusals are not here.",
				targets:     []target{query(`sum by (replica, scope) (`+rate(`lockstep_frontdoor_refused_total{`+stageFilter+`}`)+`)`, "{{replica}} {{scope}}")}},
			{kind: "timeseries", title: "Sold-out mark answers/s per replica", width: 8, height: 8, unit: "reqps",
				description: "Deducts answered sold_out from the replica's memory, with no Redis round trip; 0 on a replica without the mark.",
				targets:     []target{query(`sum by (replica) (`+rate(`lockstep_soldout_mark_answers_total{`+stageFilter+`}`)+`)`, "{{replica}}")}},
			{kind: "timeseries", title: "Sold-out marks held per replica", width: 8, height: 8, unit: "short",
				description: "SKUs each replica holds marked sold out, and whether its mark listens for stock coming back (1; 0: it marks nothing, or the replica runs without the mark).",
				targets: []target{
					query(`max by (replica) (lockstep_soldout_marks)`, "{{replica}} marks"),
					query(`max by (replica) (lockstep_soldout_mark_listening)`, "{{replica}} listening"),
				}},
		}},
		{"Orders (the order stages: one order per buyer, optimistic locks)", []panelSpec{
			{kind: "timeseries", title: "Orders/s by stage", width: 8, height: 8, unit: "ops",
				description: "Orders written per second, from each order stage's order table (every replica reports the same table).",
				targets:     []target{query(`max by (stage) (deriv(lockstep_orders{`+stageFilter+`}[$__rate_interval]))`, "{{stage}}")}},
			{kind: "stat", title: "Duplicate orders", width: 8, height: 8, fields: redAbove,
				description: "Orders beyond each buyer's first. Red on a one-per-user stage: its check did not hold (一人一单 broken); the optimistic stages promise nothing per buyer.",
				targets:     []target{query(`max by (stage) (lockstep_duplicate_orders{`+stageFilter+`})`, "{{stage}}")}},
			{kind: "stat", title: "Undersold units", width: 8, height: 8, fields: redAbove,
				description: "少卖: units gone from the stock that no order holds: initial - remaining - units ordered (a replica killed between the deduction and the order insert, a database that could not be told to void an order).",
				targets:     []target{query(`max by (stage) (lockstep_undersold{`+stageFilter+`})`, "{{stage}}")}},
		}},
		{"Asynchronous orders (the async stages: a Redis Stream and its order workers)", []panelSpec{
			{kind: "timeseries", title: "Stream: undelivered and pending", width: 6, height: 8, unit: "short",
				description: "Entries no worker read yet, and entries read but not acknowledged. Pending that only grows: a consumer acknowledging the wrong key (async-wrong-ack), or a dead worker nobody claims from (async-no-claim).",
				targets: []target{
					query(`max by (stage) (lockstep_stream_undelivered{`+stageFilter+`})`, "{{stage}} undelivered"),
					query(`max by (stage) (lockstep_stream_pending{`+stageFilter+`})`, "{{stage}} pending"),
				}},
			{kind: "timeseries", title: "Oldest pending entry", width: 6, height: 8, unit: "s",
				description: "Age of the oldest entry read and not acknowledged (0: none). It climbs while a dead worker's entries wait for a claim (claim-idle), and without bound when nobody claims them.",
				targets:     []target{query(`max by (stage) (lockstep_stream_oldest_pending_seconds{`+stageFilter+`})`, "{{stage}}")}},
			{kind: "timeseries", title: "Order lag p50 / p99", width: 6, height: 8, unit: "s",
				description: "From a sale's 200 to its order row, over the last orders the workers wrote: how far the order table trails the sale.",
				targets:     []target{query(`max by (stage, quantile) (lockstep_order_lag_seconds{`+stageFilter+`})`, "{{stage}} q{{quantile}}")}},
			{kind: "stat", title: "Dead letters", width: 6, height: 8, fields: redAbove,
				description: "Entries moved to the dead-letter stream: refused by the order database too often (an error about the row, never an outage), a buyer with another order, or malformed; an admitted order's unit went back on sale.",
				targets:     []target{query(`max by (stage) (lockstep_dead_letters{`+stageFilter+`})`, "{{stage}}")}},
		}},
		{"Redis", []panelSpec{
			{kind: "timeseries", title: "Redis commands/s", width: 8, height: 8, unit: "ops",
				targets: []target{
					query(`sum(`+rate(`redis_commands_processed_total`)+`)`, "all"),
					query(`topk(5, sum by (cmd) (`+rate(`redis_commands_total`)+`))`, "{{cmd}}"),
				}},
			{kind: "timeseries", title: "EVALSHA latency (server side, mean)", width: 8, height: 8, unit: "s",
				description: "Time Redis spends in each EVALSHA: the lock and stock Lua scripts.",
				targets:     []target{query(`sum(`+rate(`redis_commands_duration_seconds_total{cmd="evalsha"}`)+`) / sum(`+rate(`redis_commands_total{cmd="evalsha"}`)+`)`, "evalsha")}},
			{kind: "timeseries", title: "Redis connections", width: 8, height: 8, unit: "short",
				description: "Clients connected (the replicas' pools, their pub/sub connections) and clients blocked.",
				targets: []target{
					query(`sum(redis_connected_clients)`, "connected"),
					query(`sum(redis_blocked_clients)`, "blocked"),
				}},
		}},
		{"Redis Cluster (docker compose --profile cluster): where one hot SKU's load lands", []panelSpec{
			{kind: "timeseries", title: "Cluster commands/s per node", width: 12, height: 8, unit: "ops",
				description: "Commands each node processed (scripts' own included), its role beside its name. " +
					"A stage whose keys share one slot (watchdog, atomic) piles on one master; the segmented stages spread over all three. " +
					"A replica processes what its master replicates to it.",
				targets: []target{query(withRole(`sum by (instance) (`+rate(`redis_commands_processed_total{`+clusterFilter+`}`)+`)`), "{{instance}} {{role}}")}},
			{kind: "timeseries", title: "Cluster CPU per node", width: 12, height: 8, unit: "short",
				description: "Cores each node's redis-server used (system + user; 1 = one core): one master near a core bounds one hot key whatever the cluster's size.",
				targets: []target{query(withRole(`sum by (instance) (`+rate(`redis_cpu_sys_seconds_total{`+clusterFilter+`}`)+
					` + `+rate(`redis_cpu_user_seconds_total{`+clusterFilter+`}`)+`)`), "{{instance}} {{role}}")}},
		}},
		{"nginx", []panelSpec{
			{kind: "timeseries", title: "nginx requests/s", width: 12, height: 7, unit: "reqps",
				targets: []target{query(`sum(`+rate(`nginx_http_requests_total`)+`)`, "requests")}},
			{kind: "timeseries", title: "nginx connections", width: 12, height: 7, unit: "short",
				description: "active: client connections open now; waiting: idle keep-alive ones among them.",
				targets: []target{
					query(`sum(nginx_connections_active)`, "active"),
					query(`sum(nginx_connections_waiting)`, "waiting"),
				}},
		}},
		{"k6 (when it runs: docker compose --profile k6 run --rm k6)", []panelSpec{
			{kind: "timeseries", title: "k6 requests and sales/s", width: 6, height: 8, unit: "reqps",
				description: "What k6 measured, pushed by remote write: every request, and the sales (200) among them.",
				targets: []target{
					query(`sum(`+rate(`k6_http_reqs_total{name="deduct"}`)+`)`, "requests"),
					query(`sum(`+rate(`k6_sales_total`)+`)`, "sales"),
				}},
			{kind: "timeseries", title: "k6 answers", width: 6, height: 8, unit: "short",
				description: "Answers k6 counted since the run began: sales (200), sold out (409), lock busy (423).",
				targets: []target{
					query(`sum(k6_sales_total)`, "sales"),
					query(`sum(k6_sold_out_total)`, "sold out"),
					query(`sum(k6_lock_busy_total)`, "lock busy"),
				}},
			{kind: "timeseries", title: "k6 deduct latency", width: 6, height: 8, unit: "s",
				targets: []target{
					query(`max(k6_http_req_duration_p50{name="deduct"})`, "p50"),
					query(`max(k6_http_req_duration_p99{name="deduct"})`, "p99"),
				}},
			{kind: "timeseries", title: "k6 VUs", width: 6, height: 8, unit: "short",
				description: "VUs busy and allocated. When every allocated VU is busy, the open model drops buyers (k6's summary counts them as dropped_iterations).",
				targets: []target{
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

// NewDashboard builds the lockstep dashboard with Grafana's SDK. The SDK
// lays the panels out: a row, then its panels left to right, a new line
// once 24 columns are filled; so each row's widths add up to 24 per line
// (TestDashboardPanels catches an overlap).
func NewDashboard() (dashboard.Dashboard, error) {
	stage := "label_values(lockstep_requests_total, stage)"
	all, allValue := "All", "$__all"
	d := dashboard.NewDashboardBuilder("lockstep").
		Uid(DashboardUID).
		Description("Redis distributed locks on a flash sale: per stage, sales/s, oversold units and what the lock costs.").
		Tags([]string{"lockstep"}).
		Timezone("browser").
		Readonly().
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Refresh("5s").
		Version(1).
		Time("now-15m", "now").
		WithVariable(dashboard.NewQueryVariableBuilder("stage").
			Label("stage").
			Datasource(prometheusDS.ref()).
			Query(dashboard.StringOrMap{Map: map[string]any{"query": stage, "refId": "stage"}}).
			Definition(stage).
			Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
			Multi(true).
			IncludeAll(true).
			AllValue(".*").
			Sort(dashboard.VariableSortDisabled).
			Current(dashboard.VariableOption{
				Selected: cog.ToPtr(true),
				Text:     dashboard.StringOrArrayOfString{ArrayOfString: []string{all}},
				Value:    dashboard.StringOrArrayOfString{ArrayOfString: []string{allValue}},
			})).
		// The load generator walks the stages one after the other; a
		// stage's region is the time its deducts arrive.
		Annotation(dashboard.NewAnnotationQueryBuilder().
			Name("Stage runs").
			Datasource(prometheusDS.ref()).
			Enable(true).
			IconColor("rgba(255, 176, 0, 0.5)").
			Expr(`sum by (stage) (rate(lockstep_requests_total[$__rate_interval])) > 0`).
			Step("5s").
			TitleFormat("{{stage}}").
			TagKeys("stage").
			TextFormat("stage {{stage}} under load")).
		// Pushed by the load generator (--grafana-url) after each stage
		// run: its span and figures (sales, sales/s, oversold, consistent).
		Annotation(dashboard.NewAnnotationQueryBuilder().
			Name("Load generator stage runs").
			Datasource(grafanaDS.ref()).
			Enable(true).
			IconColor("rgba(0, 211, 255, 0.5)").
			Target(grafanaTags{dashboard.NewAnnotationTargetBuilder().
				Type("tags").Tags([]string{loadgen.AnnotationTag}).Limit(100)}))
	id := uint32(1)
	for _, row := range rows() {
		d.WithRow(dashboard.NewRowBuilder(row.title).Id(id))
		id++
		for _, p := range row.panels {
			d.WithPanel(newPanel(id, p))
			id++
		}
	}
	built, err := d.Build()
	if err != nil {
		return dashboard.Dashboard{}, fmt.Errorf("build the dashboard: %w", err)
	}
	return built, nil
}

// newPanel builds one panel of p's kind; its queries get refIds A, B, ….
func newPanel(id uint32, p panelSpec) cog.Builder[dashboard.Panel] {
	var targets []cog.Builder[variants.Dataquery]
	for i, t := range p.targets {
		targets = append(targets, prometheus.NewDataqueryBuilder().
			RefId(string(rune('A'+i))).
			Datasource(prometheusDS.ref()).
			Expr(t.expr).
			LegendFormat(t.legend).
			Range())
	}
	if p.kind == "stat" {
		b := stat.NewPanelBuilder().
			Id(id).Title(p.title).
			Span(uint32(p.width)).Height(uint32(p.height)).
			Datasource(prometheusDS.ref()).Targets(targets).
			ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"}).Fields("").Values(false)).
			ColorMode(common.BigValueColorModeBackground).
			GraphMode(common.BigValueGraphModeNone).
			TextMode(common.BigValueTextModeValueAndName).
			JustifyMode(common.BigValueJustifyModeAuto).
			Orientation(common.VizOrientationAuto)
		if p.description != "" {
			b.Description(p.description)
		}
		if p.unit != "" {
			b.Unit(p.unit)
		}
		if p.fields != nil {
			p.fields(b)
		}
		return b
	}
	b := timeseries.NewPanelBuilder().
		Id(id).Title(p.title).
		Span(uint32(p.width)).Height(uint32(p.height)).
		Datasource(prometheusDS.ref()).Targets(targets).
		Unit(p.unit).
		Min(0).
		DrawStyle(common.GraphDrawStyleLine).
		LineWidth(1).
		FillOpacity(10).
		ShowPoints(common.VisibilityModeNever).
		SpanNulls(common.BoolOrFloat64{Bool: cog.ToPtr(false)}).
		Legend(common.NewVizLegendOptionsBuilder().
			DisplayMode(common.LegendDisplayModeList).
			Placement(common.LegendPlacementBottom).
			ShowLegend(true)).
		Tooltip(common.NewVizTooltipOptionsBuilder().
			Mode(common.TooltipDisplayModeMulti).
			Sort(common.SortOrderDescending))
	if p.description != "" {
		b.Description(p.description)
	}
	return b
}

// grafanaTags is the target of an annotation read from Grafana's own
// store: the annotations carrying these tags. The SDK models it
// (dashboard.AnnotationTarget) but its AnnotationQuery takes only a
// datasource query (variants.Dataquery) as target, which AnnotationTarget
// is not; this adapter makes it one.
type grafanaTags struct {
	target *dashboard.AnnotationTargetBuilder
}

// tagsQuery is the built target as the annotation holds it.
type tagsQuery struct {
	dashboard.AnnotationTarget
}

func (g grafanaTags) Build() (variants.Dataquery, error) {
	t, err := g.target.Build()
	if err != nil {
		return nil, err
	}
	return tagsQuery{t}, nil
}

func (tagsQuery) ImplementsDataqueryVariant() {}
func (tagsQuery) DataqueryType() string       { return grafanaDS.Type }
func (q tagsQuery) Validate() error           { return q.AnnotationTarget.Validate() }
func (q tagsQuery) Equals(other variants.Dataquery) bool {
	o, ok := other.(tagsQuery)
	return ok && q.AnnotationTarget.Equals(o.AnnotationTarget)
}

// DashboardJSON is grafana/dashboards/lockstep.json: NewDashboard
// indented, without HTML escaping so PromQL stays readable (the SDK
// encodes each panel itself, with json.Marshal, so a panel's <, > or &
// would still come out escaped; none has one).
func DashboardJSON() ([]byte, error) {
	d, err := NewDashboard()
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(d); err != nil {
		return nil, fmt.Errorf("encode dashboard: %w", err)
	}
	return b.Bytes(), nil
}
