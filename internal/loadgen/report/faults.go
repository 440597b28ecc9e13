package report

import (
	"fmt"
	"strings"
)

// FaultReport is what a fault step saw. Times are milliseconds from the
// start of the stage run (like the timeline's) or durations.
type FaultReport struct {
	Kind string `json:"kind"`
	// Victim is what the fault hit: a replica, or a Redis address.
	Victim string `json:"victim,omitempty"`
	// VictimAnswer is what the sale that held the lock when the fault
	// struck answered (or why it did not), and VictimAnswerMS when, from the
	// fault.
	VictimAnswer   string   `json:"victim_answer,omitempty"`
	VictimStatus   int      `json:"victim_status,omitempty"`
	VictimAnswerMS *float64 `json:"victim_answer_ms,omitempty"`
	// VictimLeftMS is when, from the fault, that sale left its critical
	// section (track_holders): when it gave its work up, which its answer
	// may follow much later, after an unlock that had to time out.
	VictimLeftMS *float64 `json:"victim_left_ms,omitempty"`
	AtMS         float64  `json:"at_ms"`
	// HealedAtMS is when the fault ended: SIGCONT, Redis answering again,
	// the partition healed, the failover done; a crash ends at once.
	HealedAtMS float64 `json:"healed_at_ms"`
	// LongestGapMS, when measured (reshard-halfway), is the longest time
	// between two sales from the fault to the end of the window.
	LongestGapMS *float64 `json:"longest_gap_ms,omitempty"`
	// StuckMS is how long no sale went through from the fault on: until
	// the first sale of a request sent after it, or the whole window.
	StuckMS float64 `json:"stuck_ms"`
	// Stuck: no such sale within the window at all.
	Stuck bool `json:"stuck"`
	// RecoveryMS is from the fault's end to the first sale of a request
	// sent after it.
	RecoveryMS *float64 `json:"recovery_ms,omitempty"`
	WindowMS   float64  `json:"window_ms"`
	// Answers to the sales offered around the fault.
	Requests int `json:"requests"`
	Sales    int `json:"sales"`
	Busy     int `json:"busy"`
	Errors   int `json:"errors"`
	// LockKeys and SaleAfterReset: after a crash that left the stage stuck.
	LockKeys       []LockKey     `json:"lock_keys,omitempty"`
	SaleAfterReset *bool         `json:"sale_after_reset,omitempty"`
	Outage         *OutageReport `json:"outage,omitempty"`
	// OrderOutage: what an orders-down step's sales answered.
	OrderOutage *OrderOutageReport `json:"order_outage,omitempty"`
	// WorkerKill: what a worker-kill or duplicate-delivery step saw while
	// the worker was down.
	WorkerKill *WorkerKillReport `json:"worker_kill,omitempty"`
	// AsyncOrders: what an async stage's orders did through an
	// orders-down or redis-restart step (fault/async.go).
	AsyncOrders *AsyncOutageReport `json:"async_orders,omitempty"`
	// Notes say in words what happened, step by step.
	Notes []string `json:"notes,omitempty"`
}

// OutageReport is what a redis-restart step measured: how the shops
// answered while Redis was down, and what the restart lost.
type OutageReport struct {
	Persistence string  `json:"persistence"`
	DownMS      float64 `json:"down_ms"`
	// Answers sent while Redis was down, how many failed, the slowest.
	Answers    int     `json:"answers"`
	Failures   int     `json:"failures"`
	MaxFailMS  float64 `json:"max_fail_ms"`
	SalesAcked int     `json:"sales_acked"` // 200 answers over the whole run
	// SalesBefore answered before the kill; their rate before it.
	SalesBefore       int     `json:"sales_before"`
	SalesPerSecBefore float64 `json:"sales_per_sec_before"`
	// AuditSold and AuditInitial after the restart; InitialKept says the
	// data survived: a probe key written before the kill was still there
	// (not the audit's initial stock, which a wiped SKU's default may
	// equal).
	AuditSold    int  `json:"audit_sold"`
	AuditInitial int  `json:"audit_initial"`
	InitialKept  bool `json:"initial_kept"`
	// LostSales are acknowledged sales the audit no longer counts; LostMS
	// the same at the rate before the kill.
	LostSales int     `json:"lost_sales"`
	LostMS    float64 `json:"lost_ms"`
	Why       string  `json:"why"`
}

// faultSummary says in a few words what the fault did to the stage.
func (rep *FaultReport) summary() string {
	var parts []string
	if rep.Stuck {
		parts = append(parts, fmt.Sprintf("stuck %s", fmtMS(rep.StuckMS)+"+"))
	} else {
		parts = append(parts, "stuck "+fmtMS(rep.StuckMS))
	}
	if rep.RecoveryMS != nil {
		parts = append(parts, "recovered "+fmtMS(*rep.RecoveryMS))
	}
	if w := rep.WorkerKill; w != nil {
		parts = append(parts, fmt.Sprintf("%s died %s holding %d (%d written), down %.1fs: %d pending, %d undersold",
			w.Worker, w.At, w.PendingAtKill, w.RowsAtKill, w.DownMS/1000, w.PendingWhileDown, w.UndersoldWhileDown))
	}
	return strings.Join(parts, ", ")
}

func fmtMS(v float64) string { return fmt.Sprintf("%.0f ms", v) }

// OrderOutageReport is what the sales an order stage's database's stop
// caught answered: those sent before it continued and not answered
// before it stopped.
type OrderOutageReport struct {
	DownMS float64 `json:"down_ms"`
	// Answers to the sales the stop caught; Failures are the
	// 503s among them, MaxFailMS the slowest of those, OtherCodes the 503s
	// whose code was neither orders_unavailable nor may_have_sold, Unanswered the requests that
	// got no answer at all (the load generator's timeout).
	Answers    int     `json:"answers"`
	Failures   int     `json:"failures"`
	MaxFailMS  float64 `json:"max_fail_ms"`
	OtherCodes int     `json:"other_codes"`
	Unanswered int     `json:"unanswered"`
	// SaidUndersold are the 503s that said their units stay taken without
	// an order (counted undersold): the shop could not give them back, or
	// not void the order id (see inventory's orderSeller.insert).
	SaidUndersold int `json:"said_undersold"`
}

// WorkerKillReport is what a worker-kill or duplicate-delivery step saw:
// the order worker that died at its fault point with entries read and not
// acknowledged, the stream while it stayed down, and after it started
// again under its name.
type WorkerKillReport struct {
	Worker string `json:"worker"`
	// At is where in its batch it died: after-read or after-insert.
	At string `json:"at"`
	// PendingAtKill are the worker's own pending entries when it died:
	// read, not acknowledged; RowsAtKill of them had their order row
	// already (after-read: none; after-insert: every one, its batch's,
	// which its redelivery inserts again and finds).
	PendingAtKill int64 `json:"pending_at_kill"`
	RowsAtKill    int64 `json:"rows_at_kill"`
	// While the worker was down, after the others drained what they could:
	// entries still pending and units sold that no order holds.
	PendingWhileDown   int64 `json:"pending_while_down"`
	UndersoldWhileDown int64 `json:"undersold_while_down"`
	// DownMS is how long the worker was down.
	DownMS float64 `json:"down_ms"`
}

// What the step's own calls do when their reply is lost, when they run
// twice and when they are late:
//
//	call                      reply lost                  run twice                     late
//	stream stats (Redis,      the step fails with the     a read: the same figures      read before the SIGCONT or the
//	  backlog)                error, nothing guessed                                    kill it stands for, so it can
//	                                                                                    only undercount (no worker reads
//	                                                                                    while held; checks want > 0)
//	SIGSTOP/SIGCONT of the    (a signal: no reply) a      a stopped worker stays        a worker taking SIGSTOP a moment
//	  workers (Injector)      failed one fails the step   stopped, a running one runs   late writes one entry more: the
//	                          and the undo continues all                                backlog is read a second later
//	rebuy (POST a sale as a   the step fails; the sale    the second answers 409        the workers are held while it
//	  buyer of before)        may be admitted (none: a    (the buyer is now in the      runs, so its buyer's first
//	                          dead letter more)           set): the none row's check    order is in the table already
//	                                                      fails, saying 409 — not
//	                                                      hidden (Go's client does not
//	                                                      resend a POST)
//	list orders (GET, after   the step fails              a read: the same rows         read after draining: nothing
//	  draining)                                                                         writes rows any more
//
// AsyncOutageReport is what an async stage's orders did through an
// orders-down or a redis-restart step: the stream's backlog when the fault
// struck and when it healed, and, after the workers drained the stream,
// the sales answered 200 whose order no row holds.
type AsyncOutageReport struct {
	// Admitted are the step's sales answered 200 with an order id;
	// AdmittedBeforeHeal those sent before the fault healed (redis-restart:
	// admitted by the Redis that was killed).
	Admitted           int `json:"admitted"`
	AdmittedBeforeHeal int `json:"admitted_before_heal"`
	// AtFault and AtHeal are the stream's backlog when the fault struck
	// and when it healed (redis-restart: none, Redis just came back).
	AtFault Backlog  `json:"at_fault"`
	AtHeal  *Backlog `json:"at_heal,omitempty"`
	// WithoutOrder are admitted sales whose order id no row holds after
	// draining; WithoutOrderBeforeHeal those sent before the fault healed.
	WithoutOrder           int `json:"without_order"`
	WithoutOrderBeforeHeal int `json:"without_order_before_heal"`
	// WorkersHeld: the order workers were stopped (SIGSTOP) for the second
	// half of before and until Redis answered again (redis-restart).
	WorkersHeld bool `json:"workers_held,omitempty"`
	// Rebuyer bought again after the restart, with an order written before
	// the kill: RebuyStatus 409 already_bought when Redis still knew the
	// buyer, 200 when it forgot them.
	Rebuyer     string `json:"rebuyer,omitempty"`
	RebuyStatus int    `json:"rebuy_status,omitempty"`
}

// Backlog is an order stream's entries that no worker has read
// (Undelivered) and those read and not acknowledged (Pending).
type Backlog struct {
	Undelivered     int64   `json:"undelivered"`
	Pending         int64   `json:"pending"`
	OldestPendingMS float64 `json:"oldest_pending_ms"`
}

// Entries is the backlog's whole count.
func (b Backlog) Entries() int64 { return b.Undelivered + b.Pending }
