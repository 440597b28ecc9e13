package loadgen

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lockstep/lockstep/asyncorders"
	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/internal/shoprules"
)

// An async stage's stream while it runs: the live page's snapshot has the
// latest audit's figures, and the run keeps the most each figure reached;
// other stages keep nothing.
func TestAStreamIsFollowedWhileItRuns(t *testing.T) {
	if streamPeak(shoprules.Shop(), "atomic") != nil {
		t.Error("a lock stage keeps a stream peak")
	}
	peak := streamPeak(shoprules.Shop(), asyncorders.StageStream)
	live := &LiveStage{}
	for _, s := range []asyncorders.Stats{
		{Length: 10, Pending: 7, OldestPending: 2 * time.Second, LagP50: time.Millisecond, LagP99: 40 * time.Millisecond},
		{Length: 30, Pending: 2, Undelivered: 5, OldestPending: 500 * time.Millisecond, DeadLetters: 1, LagP50: 3 * time.Millisecond, LagP99: 9 * time.Millisecond},
	} {
		peak.Most(&s)
		live.audited(report.Audit{Stream: &s})
	}
	want := report.StreamView{Length: 30, Undelivered: 5, Pending: 7, OldestPendingS: 2, DeadLetters: 1, LagP50MS: 3, LagP99MS: 40, Samples: 2}
	if *peak != want {
		t.Errorf("most seen %+v, want %+v", *peak, want)
	}
	if now := live.Snapshot().Stream; now == nil || now.Length != 30 || now.Pending != 2 || now.LagP99MS != 9 {
		t.Errorf("live snapshot's stream %+v, want the latest audit's", now)
	}
}

// report.html has an order stream table: for each async run the most its
// stream reached while running and what was left after draining; none
// without an async run.
func TestTheReportShowsTheOrderStreams(t *testing.T) {
	stream := &asyncorders.Stats{Length: 300, LagP50: 2 * time.Millisecond, LagP99: 35 * time.Millisecond}
	rep := &report.Report{Stages: []report.StageRun{
		{StageID: report.StageID{Stage: "atomic"}, Answers: report.Answers{Sales: 10}, Outcome: report.Outcome{Audit: report.Audit{Initial: 10}}},
		{
			StageID: report.StageID{Stage: asyncorders.StageStream},
			Answers: report.Answers{Sales: 300},
			Drain:   report.Drain{DrainMS: 400, StreamWhileRunning: &report.StreamView{Length: 280, Pending: 17, OldestPendingS: 1.5, LagP99MS: 30, Samples: 12}},
			Outcome: report.Outcome{Audit: report.Audit{Initial: 300, Stream: stream}},
		},
	}}
	var html bytes.Buffer
	if err := rep.WriteHTML(&html); err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile(`<tr data-stream="async-stream">(.*?)</tr>`).FindAllStringSubmatch(html.String(), -1)
	if len(rows) != 2 || !strings.Contains(rows[0][1], "most while running (12 audits)") || !strings.Contains(rows[0][1], "<td>17</td><td>1.5</td>") ||
		!strings.Contains(rows[1][1], "after draining (0.4 s)") || !strings.Contains(rows[1][1], "<td>300</td>") || !strings.Contains(rows[1][1], "<td>35.0</td>") {
		t.Errorf("stream rows %q", rows)
	}
	html.Reset()
	rep.Stages = rep.Stages[:1]
	if err := rep.WriteHTML(&html); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(html.String(), "data-stream") {
		t.Error("a report without async runs has a stream table")
	}
}
