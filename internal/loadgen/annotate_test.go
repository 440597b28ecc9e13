package loadgen

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/internal/shoprules"
)

// grafanaRecorder stands in for Grafana's annotation API and keeps what
// it was sent.
type grafanaRecorder struct {
	mu          sync.Mutex
	annotations []grafanaAnnotation
	auth        []string // the Authorization header of each
}

func startGrafanaRecorder(t *testing.T, status int) (*grafanaRecorder, *httptest.Server) {
	g := &grafanaRecorder{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/api/annotations" || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("grafana got %s %s (%s)", r.Method, r.URL.Path, r.Header.Get("Content-Type"))
			http.NotFound(w, r)
			return
		}
		var a grafanaAnnotation
		if err := json.NewDecoder(r.Body).Decode(&a); err != nil {
			t.Errorf("annotation body: %v", err)
		}
		g.mu.Lock()
		g.annotations = append(g.annotations, a)
		g.auth = append(g.auth, r.Header.Get("Authorization"))
		g.mu.Unlock()
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"message":"Annotation added","id":1}`))
	}))
	t.Cleanup(srv.Close)
	return g, srv
}

const annotatedScenario = `
name: annotated
defaults:
  stock: 20
  workers: 4
  duration: 2s
  until_sold_out: true
runs:
  - stage: racy
  - stage: absent
  - stage: atomic
`

// TestRunAnnotatesEachStageRun: one annotation per stage run that ran (not
// the skipped one), tagged lockstep and the stage, spanning the run, in
// order and without overlap.
func TestRunAnnotatesEachStageRun(t *testing.T) {
	fake := startFakeShop(t, 1)
	grafana, srv := startGrafanaRecorder(t, http.StatusOK)
	sc, err := ParseScenario([]byte(annotatedScenario), shoprules.Shop())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	before := time.Now()
	rep, err := Run(ctx, Config{
		Target: fake.proxy, Scenario: sc,
		GrafanaURL: strings.Replace(srv.URL, "http://", "http://admin:secret@", 1) + "/",
	})
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now()

	grafana.mu.Lock()
	defer grafana.mu.Unlock()
	ran := []report.StageRun{rep.Stages[0], rep.Stages[2]}
	if rep.Stages[1].Skipped == "" || len(grafana.annotations) != len(ran) {
		t.Fatalf("%d annotations for stage runs %+v, want %d (absent is skipped)", len(grafana.annotations), rep.Stages, len(ran))
	}
	previousEnd := before.UnixMilli()
	for i, a := range grafana.annotations {
		row := ran[i]
		if want := []string{"lockstep", row.Stage}; !slices.Equal(a.Tags, want) {
			t.Errorf("annotation %d: tags %v, want %v", i, a.Tags, want)
		}
		if a.Time < previousEnd || a.TimeEnd < a.Time || a.TimeEnd > after.UnixMilli() {
			t.Errorf("annotation %d (%s): %d..%d, want inside %d..%d after the previous one", i, row.Stage, a.Time, a.TimeEnd, previousEnd, after.UnixMilli())
		}
		if a.TimeEnd-a.Time < int64(row.ElapsedMS) {
			t.Errorf("annotation %d (%s) spans %d ms, the attack alone took %.0f ms", i, row.Stage, a.TimeEnd-a.Time, row.ElapsedMS)
		}
		previousEnd = a.TimeEnd
		for _, want := range []string{row.Stage + ": ", "sales/s", "oversold", "consistent"} {
			if !strings.Contains(a.Text, want) {
				t.Errorf("annotation %d text %q: no %q", i, a.Text, want)
			}
		}
		if user, password, ok := (&http.Request{Header: http.Header{"Authorization": {grafana.auth[i]}}}).BasicAuth(); !ok || user != "admin" || password != "secret" {
			t.Errorf("annotation %d: Authorization %q, want basic auth admin:secret from the URL", i, grafana.auth[i])
		}
	}
}

// TestAnnotationFailuresAreWarnings: a Grafana that refuses annotations,
// or is not there, leaves the run and its report as they would be.
func TestAnnotationFailuresAreWarnings(t *testing.T) {
	fake := startFakeShop(t, 1)
	refused, refusing := startGrafanaRecorder(t, http.StatusUnauthorized)
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	sc, err := ParseScenario([]byte("name: one\nruns:\n  - stage: atomic\n    stock: 5\n    until_sold_out: true\n"), shoprules.Shop())
	if err != nil {
		t.Fatal(err)
	}
	for _, grafanaURL := range []string{refusing.URL, gone.URL} {
		var logged strings.Builder
		rep, err := Run(t.Context(), Config{
			Target: fake.proxy, Scenario: sc, GrafanaURL: grafanaURL, GrafanaToken: "sa-token",
			Logger: slog.New(slog.NewTextHandler(&logged, nil)),
		})
		if err != nil || len(rep.Stages) != 1 || rep.Stages[0].Error != "" || rep.Stages[0].Sales != 5 {
			t.Fatalf("Grafana at %s: run error %v, report %+v", grafanaURL, err, rep)
		}
		if !strings.Contains(logged.String(), "level=WARN msg=\"grafana annotation\" stage=atomic") {
			t.Errorf("Grafana at %s: no warning logged:\n%s", grafanaURL, logged.String())
		}
	}
	refused.mu.Lock()
	defer refused.mu.Unlock()
	if !slices.Equal(refused.auth, []string{"Bearer sa-token"}) {
		t.Errorf("Authorization sent %q, want the token as a bearer token once", refused.auth)
	}
}

func TestNewAnnotatorRejectsBadURLs(t *testing.T) {
	for _, bad := range []string{"grafana:3000", "ftp://grafana", "http://", "http://admin:pw@[::1"} {
		_, err := newAnnotator(bad, "")
		if err == nil {
			t.Errorf("newAnnotator(%q) accepted it", bad)
		} else if strings.Contains(err.Error(), "pw") {
			t.Errorf("newAnnotator(%q): the error shows the password: %v", bad, err)
		}
	}
	if a, err := newAnnotator("", ""); a != nil || err != nil {
		t.Errorf("no URL: %v %v, want no annotator", a, err)
	}
}
