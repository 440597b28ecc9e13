// Package outcome answers, from a call's error alone, the one question every
// retry rests on: did the call run? Every client of the project — the shop's
// Idempotency-Key markers, inventory's stock writes and lock servers,
// asyncorders, orders — asks it here, so that one error is never "not run"
// in one place and "may have run" in another.
//
// What each client library's errors say:
//
//	error                                                    Of          why
//	nil, redis.Nil                                           Ran         the server answered
//	go-redis error reply (ERR, WRONGTYPE, a script's error)  Ran         the server answered it (a script may have written before failing)
//	MOVED, ASK, TRYAGAIN, CLUSTERDOWN, LOADING, READONLY,    Refused     the server refused before running anything;
//	  MASTERDOWN, BUSY, NOSCRIPT, EXECABORT, OOM, NOREPLICAS             sending it again is safe
//	redis.ErrPoolTimeout, redis.ErrClosed                    NotSent     no connection was had to send it on
//	dial error (*net.OpError Op "dial": refused, timed out)  NotSent     no connection was made
//	read/write timeout (net.Error Timeout), io.EOF,          MayHaveRun  sent (or partly sent) and the reply lost: a master
//	  io.ErrUnexpectedEOF, connection reset                              stalled past the timeout runs it when it continues
//	context.Canceled / DeadlineExceeded (any library)        MayHaveRun  go-redis answers it before a connection is taken,
//	                                                                     database/sql and go-sql-driver also while the query
//	                                                                     runs: the error alone cannot tell them apart
//	driver.ErrBadConn, sql.ErrConnDone                       NotSent     database/sql and go-sql-driver return it only when
//	                                                                     nothing was written on the connection
//	mysql.ErrInvalidConn ("invalid connection")              MayHaveRun  the connection broke after the query was written
//	*mysql.MySQLError 1205, 1213, 1040, 1290, 1836           Refused     lock wait timeout or deadlock (the statement was
//	                                                                     rolled back), too many connections, read only
//	any other *mysql.MySQLError                              Ran         the server answered (a duplicate key, a syntax error)
//	*sqlite.Error SQLITE_BUSY, SQLITE_LOCKED, INTERRUPT      Refused     the statement did not run, or was rolled back
//	any other *sqlite.Error                                  Ran         the embedded engine answered
//	etcd rpctypes error (ErrCompacted, ErrKeyNotFound…)      Ran         the cluster answered
//	gRPC status Unavailable, DeadlineExceeded, Canceled,     MayHaveRun  the request may have reached the leader and been
//	  Unknown, Internal                                                  applied; etcd's client sees the same status either way
//	other gRPC status codes                                  Refused     InvalidArgument, FailedPrecondition,
//	                                                                     ResourceExhausted…: refused by the server
//	zk.ErrNoServer, zk.ErrClosing                            NotSent     the request was never sent to a server
//	zk.ErrConnectionClosed, zk.ErrSessionExpired,            MayHaveRun  the connection or session ended while the request
//	  zk.ErrSessionMoved                                                 was in flight: ZooKeeper may have applied it (a
//	                                                                     closed client's request gets the same error)
//	other zk.Err* (ErrNodeExists, ErrNoNode, ErrBadVersion…) Ran         the ensemble answered
//	anything else                                            MayHaveRun  unknown is never taken for "not run"
//
// ErrMayHaveRun of internal/redisclient (a cluster client that refused to
// resend) carries the lost reply's error, so it reads as MayHaveRun too.
// Each row is made by a real server in the tests (outcometest for
// go-redis, outcome_test.go for MySQL and SQLite, coordinators_test.go for
// etcd and ZooKeeper), through internal/faultproxy where the connection
// breaks after the server acted; the rows no server makes on demand
// (driver.ErrBadConn, gRPC codes other than those, zk.ErrNoServer,
// ErrSessionExpired) are checked on the library's own error values.
package outcome

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"net"
	"strings"
	"syscall"

	"github.com/go-sql-driver/mysql"
	"github.com/go-zookeeper/zk"
	"github.com/redis/go-redis/v9"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Outcome is what a failed call did on its server.
type Outcome int

const (
	// Ran: the server ran the call and answered it (the answer may be an
	// error: a duplicate key, a WRONGTYPE, a script that failed).
	Ran Outcome = iota
	// Refused: the server answered without running it; sending it again
	// is safe.
	Refused
	// NotSent: the call never reached a server.
	NotSent
	// MayHaveRun: it was sent and no answer came back; it may have run,
	// may still run, or not.
	MayHaveRun
)

func (o Outcome) String() string {
	switch o {
	case Ran:
		return "ran"
	case Refused:
		return "refused"
	case NotSent:
		return "not sent"
	default:
		return "may have run"
	}
}

// Of classifies the error of one call; nil is Ran.
func Of(err error) Outcome {
	switch {
	case err == nil, errors.Is(err, redis.Nil):
		return Ran
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return MayHaveRun
	}
	if o, ok := redisOutcome(err); ok {
		return o
	}
	if o, ok := sqlOutcome(err); ok {
		return o
	}
	if o, ok := coordinatorOutcome(err); ok {
		return o
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" || errors.Is(err, syscall.ECONNREFUSED) {
		return NotSent
	}
	return MayHaveRun
}

// MayHaveRunErr reports whether the call that failed with err may have run
// without its caller learning what it did: the calls to resolve.
func MayHaveRunErr(err error) bool { return Of(err) == MayHaveRun }

// NotRun reports whether the call that failed with err provably changed
// nothing on its server: refused, or never sent.
func NotRun(err error) bool {
	o := Of(err)
	return o == Refused || o == NotSent
}

// redisRefusals are the error replies with which Redis declines a command
// before running any of it.
var redisRefusals = []string{"MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN", "LOADING", "READONLY", "MASTERDOWN", "BUSY", "NOSCRIPT", "EXECABORT", "OOM", "NOREPLICAS"}

func redisOutcome(err error) (Outcome, bool) {
	var reply redis.Error
	switch {
	case errors.Is(err, redis.ErrPoolTimeout), errors.Is(err, redis.ErrClosed):
		return NotSent, true
	case errors.As(err, &reply):
		prefix, _, _ := strings.Cut(reply.Error(), " ")
		for _, r := range redisRefusals {
			if prefix == r {
				return Refused, true
			}
		}
		return Ran, true
	}
	return 0, false
}

// MySQL's errors that leave the statement not run: ER_LOCK_WAIT_TIMEOUT and
// ER_LOCK_DEADLOCK (rolled back), ER_CON_COUNT_ERROR, ER_OPTION_PREVENTS_STATEMENT
// (--read-only) and ER_READ_ONLY_MODE.
var mysqlRefusals = []uint16{1205, 1213, 1040, 1290, 1836}

func sqlOutcome(err error) (Outcome, bool) {
	var my *mysql.MySQLError
	var lite sqliteError
	switch {
	case errors.Is(err, driver.ErrBadConn), errors.Is(err, sql.ErrConnDone):
		return NotSent, true
	case errors.Is(err, mysql.ErrInvalidConn):
		return MayHaveRun, true
	case errors.As(err, &my):
		for _, n := range mysqlRefusals {
			if my.Number == n {
				return Refused, true
			}
		}
		return Ran, true
	case errors.As(err, &lite):
		switch lite.Code() & 0xff { // the primary code of an extended one
		case sqliteBusy, sqliteLocked, sqliteInterrupt:
			return Refused, true
		}
		return Ran, true
	}
	return 0, false
}

// sqliteError is modernc.org/sqlite's *Error, read through its method so
// that every client of this package does not link the SQLite engine.
type sqliteError interface {
	error
	Code() int
}

// SQLite's primary result codes (sqlite3.h) of a statement not run.
const (
	sqliteBusy      = 5
	sqliteLocked    = 6
	sqliteInterrupt = 9
)

// coordinatorOutcome reads etcd's and ZooKeeper's errors.
func coordinatorOutcome(err error) (Outcome, bool) {
	var etcd rpctypes.EtcdError
	if errors.As(err, &etcd) {
		return Ran, true
	}
	switch {
	case errors.Is(err, zk.ErrNoServer), errors.Is(err, zk.ErrClosing):
		return NotSent, true
	case errors.Is(err, zk.ErrConnectionClosed), errors.Is(err, zk.ErrSessionExpired), errors.Is(err, zk.ErrSessionMoved):
		return MayHaveRun, true
	case zkAnswer(err):
		return Ran, true
	}
	if s, ok := status.FromError(err); ok && s.Code() != codes.OK {
		switch s.Code() {
		case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Unknown, codes.Internal:
			return MayHaveRun, true
		}
		return Refused, true
	}
	return 0, false
}

// zkAnswers are the errors go-zookeeper makes of the ensemble's replies.
var zkAnswers = []error{zk.ErrNodeExists, zk.ErrNoNode, zk.ErrBadVersion, zk.ErrNotEmpty, zk.ErrNoChildrenForEphemerals,
	zk.ErrNoAuth, zk.ErrInvalidACL, zk.ErrInvalidFlags, zk.ErrAuthFailed, zk.ErrAPIError, zk.ErrBadArguments, zk.ErrInvalidPath}

func zkAnswer(err error) bool {
	for _, a := range zkAnswers {
		if errors.Is(err, a) {
			return true
		}
	}
	return false
}
