package inventory

// Info is what GET /api/stages teaches about a stage.
type Info struct {
	ID          string `json:"id"`
	Title       string `json:"title"`
	ArticleCase string `json:"article_case"`
	Mechanism   string `json:"mechanism"`
	Defect      string `json:"defect"`
	// Lease is the article's default lock lease the lock_ttl fault overrides
	// ("" when the stage's lock has none).
	Lease       string `json:"default_lock_ttl,omitempty"`
	Available   bool   `json:"available"`
	Unavailable string `json:"unavailable_reason,omitempty"`
	Faults      Faults `json:"faults"`
}

type catalogEntry struct {
	Info
	// redisLock: the stage holds a lock on a server (Redis, or a lock
	// server beside it), so crash_holding_lock means something.
	redisLock bool
}

// catalog is the progression of 《关于分布式锁(Redisson)的原理分析》 (cases
// 1.1-1.6 and its closing idea), the other articles on Redisson and RedLock,
// and the atomic script beyond the articles (docs/articles.md names them
// all; ArticleCase is what the live page and report.html show). Order matters: it is the order the workshop runs.
var catalog = []catalogEntry{
	{Info: Info{
		ID: "naive", Title: "GET then SET, no lock", ArticleCase: "《关于分布式锁(Redisson)的原理分析》 case 1.1",
		Mechanism: "GET stock, business work, SET stock-1 (with INCRBY sold in one MULTI/EXEC); nothing serialises the read-modify-write.",
		Defect:    "Concurrent requests read the same stock and each write stock-1: lost updates, so sold grows past what stock lost and past the initial stock. Oversells even on one replica.",
	}},
	{Info: Info{
		ID: "synchronized", Title: "Process-local mutex (Java synchronized)", ArticleCase: "《关于分布式锁(Redisson)的原理分析》 case 1.2",
		Mechanism: "The read-modify-write runs under one mutex of the shop process, as synchronized(this) in the article.",
		Defect:    "The mutex lives in one JVM/process: correct with a single replica, but each replica behind nginx has its own, so two or more replicas oversell.",
	}},
	{Info: Info{
		ID: "setnx", Title: "SETNX lock, DEL in finally", ArticleCase: "《关于分布式锁(Redisson)的原理分析》 case 1.3",
		Mechanism: "SETNX lock key with no expiry; busy answers at once (the article's error_code); DEL in a deferred (finally) release.",
		Defect:    "A replica killed while holding the lock (kill -9, redeploy) never runs finally: the key has no TTL, so no sale succeeds until someone deletes it (reset).",
	}, redisLock: true},
	{Info: Info{
		ID: "setnx-expire", Title: "SET NX EX with a TTL, plain DEL", ArticleCase: "《关于分布式锁(Redisson)的原理分析》 case 1.4",
		Mechanism: "SET lock NX EX 10 (the article's 10 s), busy answers at once, plain delete in finally.",
		Defect:    "Work longer than the TTL: the lock expires, a second request takes it, and the first one's DEL removes the second one's lock (a foreign unlock), letting a third in. Two holders at once oversell.",
		Lease:     setnxExpireTTL.String(),
	}, redisLock: true},
	{Info: Info{
		ID: "uuid-lua", Title: "SET NX PX <uuid>, Lua compare-and-delete", ArticleCase: "《关于分布式锁(Redisson)的原理分析》 case 1.5; 《常见分布式锁方案对比》",
		Mechanism: "SET lock <uuid> NX PX 30000; release with a Lua script that deletes only if the value is still ours; busy answers at once.",
		Defect:    "No more foreign deletes, but nothing extends the TTL: work longer than it still lets a second holder in while the first is in its critical section, and they oversell.",
		Lease:     uuidLuaTTL.String(),
	}, redisLock: true},
	{Info: Info{
		ID: "watchdog", Title: "Redisson RLock with watchdog", ArticleCase: "《关于分布式锁(Redisson)的原理分析》 case 1.6; 《Redisson分布式锁的实现》; 《redisson的分布式锁的特点》; 《常见分布式锁方案对比》; 《使用分布式锁需要考虑的一些问题》",
		Mechanism: "Reentrant hash lock (HINCRBY/PEXPIRE/PTTL in Lua), renewed by a watchdog every lease/3 while held, unlock PUBLISHes to waiters blocked on pub/sub with a bounded wait.",
		Defect:    "Correct, even with slow work and after a crash (the lock expires within the watchdog timeout), but every sale of a SKU is serialised behind one lock, so throughput is bounded by one critical section at a time.",
		Lease:     watchdogTimeout.String(),
	}, redisLock: true},
	{Info: Info{
		ID: "segmented", Title: "Segmented stock, one watchdog lock per segment", ArticleCase: "《关于分布式锁(Redisson)的原理分析》, closing 锁分段 (lock striping)",
		Mechanism: "Stock split into N segments (default 16) with keys tagged {sku:i}, each under its own watchdog lock; a sale picks a random segment, moves on to the next while a segment's lock is taken (waiting only when the first four are all busy) walks the others when one cannot serve, and takes the units from several segments (locked in ascending order, written in one transaction) when none can alone, answering sold out only when the SKU's total is short.",
		Defect:    "Correct and about N times the throughput of watchdog until Redis or the CPU saturates; on one Redis the hot SKU's segments still share one server, and the last units cost a sale across several segments' locks.",
		Lease:     watchdogTimeout.String(),
	}, redisLock: true},
	{Info: Info{
		ID: "atomic", Title: "One Lua script, no lock", ArticleCase: "beyond the articles",
		Mechanism: "A single Lua script checks the stock and deducts it with INCRBY sold, atomically inside Redis; business work happens before it, outside any lock.",
		Defect:    "None for stock: it is the throughput ceiling, what any lock costs. It gives up the read-modify-write shape, so work that must see the stock cannot run inside it.",
	}},
	{Info: Info{
		ID: "segmented-atomic", Title: "Segmented stock, each segment deducted by one Lua script", ArticleCase: "beyond the articles (segmented and atomic together)",
		Mechanism: "Stock split into N segments as in segmented, with no segment lock: a sale runs atomic's script on a random segment, then on one that can serve it; a sale no segment can serve alone takes what each segment holds, one script per segment, under a lock of the SKU, and gives it all back when the SKU is short, so sold out is answered only then.",
		Defect:    "None for stock. On one Redis it costs about what atomic costs; on a Redis Cluster its segments' scripts spread over the masters, so one hot SKU is no longer bound by one shard. A shop killed in the middle of a sale across segments leaves what it took counted sold.",
	}},
	{Info: Info{
		ID: "redlock", Title: "RedLock over independent masters", ArticleCase: "《Redisson分布式锁的实现》 红锁; 《常见分布式锁方案对比》",
		Mechanism: "The watchdog lock taken on a majority of N >= 3 independent Redis masters within the wait budget, released on all of them.",
		Defect:    "Survives one master failing, at the cost of N round trips per acquisition; still no fencing, so a paused holder can outlive its lease.",
		Lease:     watchdogTimeout.String(),
	}, redisLock: true},
	{Info: Info{
		ID: "fenced", Title: "Watchdog lock with fencing tokens", ArticleCase: "beyond the articles (fencing tokens)",
		Mechanism: "The lock hands each new holder a larger token (INCR in the lock's hash slot; kept across reentrant levels); the stock GET refuses an older token and sets the SKU's fence to the holder's token and name, and the stock SET, one Lua script, is refused unless the fence still names that holder (a failover can hand out one token twice).",
		Defect:    "None for stock: a holder whose lock was lost to expiry, a pause (SIGSTOP) or a failover cannot write its stale read back, so nothing is oversold; the price is a script on the read and the write, and a refused sale answers lock_busy.",
		Lease:     watchdogTimeout.String(),
	}, redisLock: true},
	{Info: Info{
		ID: "mysql", Title: "MySQL unique-index lock", ArticleCase: "《常见分布式锁方案对比》, the MySQL unique-index lock",
		Mechanism: "INSERT a row named after the SKU into a table whose primary key is the name: the row is the lock, a duplicate key answers busy at once; DELETE it to unlock. The stock stays in Redis.",
		Defect:    "No expiry: a holder killed while holding (kill -9) leaves its row, and no sale succeeds until someone deletes it (reset). Not reentrant, no waiting, and a database round trip each way.",
	}, redisLock: true},
	{Info: Info{
		ID: "etcd", Title: "etcd concurrency.Mutex on a session lease", ArticleCase: "beyond the articles (etcd, the ZooKeeper recipe on Raft)",
		Mechanism: "Each waiter puts a key under the lock's prefix on its session's lease; the lowest create revision holds and each waiter watches only its predecessor (no herd). The session's keep-alive is the watchdog: a dead holder's lease expires and its key goes.",
		Defect:    "Correct while the holder's lease lives, and Raft keeps the lock across a leader failover; but, like every lease lock, a holder paused past its lease can still write unless the fence fault makes the stock check the key's create revision, and each acquisition is a Raft write on a quorum.",
		Lease:     etcdLeaseTTL.String(),
	}, redisLock: true},
	{Info: Info{
		ID: "zookeeper", Title: "ZooKeeper ephemeral sequential nodes (Curator's InterProcessMutex)", ArticleCase: "《关于分布式锁(Redisson)的原理分析》, closing (Redisson or ZooKeeper?); 《常见分布式锁方案对比》",
		Mechanism: "Each waiter creates an ephemeral sequential node under the lock's node; the lowest sequence holds, each waiter watches only the node before its own (no herd). The session is the lease: a dead holder's session expires and its node goes.",
		Defect:    "Correct while the holder's session lives, and Zab keeps the lock across a leader failover; but a holder paused past its session timeout can still write unless the fence fault makes the stock check the node's czxid, and every acquisition and release is a quorum write.",
		Lease:     zkSessionTimeout.String(),
	}, redisLock: true},
	{Info: Info{
		ID: "one-per-user-naive", Title: "一人一单: check the buyer's orders, then sell", ArticleCase: "黑马点评 秒杀 (一人一单)",
		Mechanism: "SELECT the buyer's order of the SKU; none: business work, deduct the stock (atomic's script), INSERT the order. No lock, and no unique index on the buyer.",
		Defect:    "Concurrent requests of one buyer all find no order before any inserts one: duplicate orders, on one replica as on three.",
	}, redisLock: true},
	{Info: Info{
		ID: "one-per-user-synchronized", Title: "一人一单 under synchronized(userId.intern())", ArticleCase: "黑马点评 秒杀 (一人一单, synchronized)",
		Mechanism: "The check-deduct-insert of one-per-user-naive under a process-local mutex per buyer.",
		Defect:    "Correct on one replica; each replica has its own mutexes, so one buyer's requests spread over three replicas still make duplicate orders.",
	}, redisLock: true},
	{Info: Info{
		ID: "one-per-user-lua", Title: "一人一单 in one Lua script, unique index as the backstop", ArticleCase: "黑马点评 秒杀优化 (Lua)",
		Mechanism: "One script checks the stock and the buyer (a hash of buyer to order id under the SKU's hash tag), deducts and records the buyer; then the order is inserted with the buyer in the unique (stage, sku, buyer) index.",
		Defect:    "None for orders: one per buyer across replicas. The order insert is a second write after the script: a replica killed between them leaves units taken without an order (undersold); a failed insert voids the order id and gives the units back.",
	}, redisLock: true},
	{Info: Info{
		ID: "one-per-user-lock", Title: "一人一单 under a distributed lock per buyer", ArticleCase: "黑马点评 分布式锁 (一人一单)",
		Mechanism: "The check-deduct-insert of one-per-user-naive under the library's watchdog Mutex on lockstep:<stage>:{<sku>:buyer:<user>}:lock.",
		Defect:    "None for orders, at the cost of a lock round trip per sale; as for every sale with the insert after the deduction, a replica killed between them leaves units taken without an order.",
		Lease:     watchdogTimeout.String(),
	}, redisLock: true},
	{Info: Info{
		ID: "optimistic-redis", Title: "乐观锁 on Redis: WATCH, MULTI, EXEC", ArticleCase: "黑马点评 超卖 (乐观锁, CAS)",
		Mechanism: "WATCH the stock, GET it, business work, then SET the new stock and INCRBY sold in a MULTI/EXEC that Redis refuses when the stock changed; a refused sale is not retried. The order is inserted after.",
		Defect:    "No oversell, but under contention most sales are refused (conflicts) and the run ends with stock left while buyers were turned away: it sells too little (少卖).",
	}, redisLock: true},
	{Info: Info{
		ID: "optimistic-mysql-version", Title: "乐观锁 in MySQL: UPDATE … WHERE stock = <read>", ArticleCase: "黑马点评 超卖 (乐观锁, version check)",
		Mechanism: "The stock is a row of the order database: SELECT it, business work, then in one transaction INSERT the order and UPDATE stock = stock - q WHERE stock = <the stock read>; no row updated rolls the order back.",
		Defect:    "No oversell, but every sale that raced another is refused: 黑马点评's 100 units of which 13 sold. Sells too little (少卖); the conflicts count what it cost.",
	}, redisLock: true},
	{Info: Info{
		ID: "optimistic-mysql", Title: "乐观锁 fixed: UPDATE … WHERE stock >= q", ArticleCase: "黑马点评 超卖 (乐观锁, stock > 0)",
		Mechanism: "As optimistic-mysql-version, with the condition stock >= q: the row lock InnoDB takes for the UPDATE serialises the writers, and only a real shortage refuses.",
		Defect:    "None: no oversell, no undersell, the order and the units in one transaction; every sale is a database write on one hot row.",
	}, redisLock: true},
	{Info: Info{
		ID: "semaphore", Title: "Stock as a Redisson RSemaphore: trySetPermits, tryAcquire", ArticleCase: "谷粒商城 秒杀 (Redisson 信号量)",
		Mechanism: "The reset loads the stock into the SKU's semaphore with trySetPermits; a sale is tryAcquire(qty) with no wait, then the order insert (synchronous here; the course sends it to a queue). Nothing gives a permit back.",
		Defect:    "trySetPermits does nothing once the semaphore exists, so a reset that changes the stock is ignored and the sales go on against the permits left (past the new stock: oversold); a replica killed between the acquire and the insert, or an insert that fails, leaves a unit neither sold nor on sale (undersold, 少卖).",
	}, redisLock: true},
	{Info: Info{
		ID: "semaphore-expirable", Title: "Stock as a PermitExpirableSemaphore: leased until the order is written", ArticleCase: "谷粒商城 秒杀 fixed (Redisson RPermitExpirableSemaphore)",
		Mechanism: "One semaphore per reset round set to the stock; a sale leases its permits for 1 s, inserts its order within half of it, then consumes them (one script: the permits leave for good, the available ones never dip); a failed insert is voided and its permits given back.",
		Defect:    "No undersell: a replica killed before its insert loses nothing, its permits come back when their lease ends. Its limit is the lease: an insert that cannot be voided may land after its permits came back, and sell them twice.",
	}, redisLock: true},
	{Info: Info{
		ID: "async-stream", Title: "秒杀优化: admit in one script, order workers write later", ArticleCase: "黑马点评 秒杀优化 (Lua + Stream 消息队列)",
		Mechanism: "One script checks the stock and the buyer set, deducts, adds the buyer and XADDs the order message (one hash tag); the sale answers with the order id at once. Order workers (cmd/orderworker) read in one consumer group, insert the order by its id, XACK; they claim entries idle past a bound (XAUTOCLAIM), and an entry whose order the database refused too often (an error about the row; never an outage nor a redelivery) goes to a dead-letter stream with its unit returned and its buyer freed, once.",
		Defect:    "None once drained: initial = remaining + units in orders, nothing pending. The order row comes later than the answer (the lag), and a Redis without persistence loses admitted messages on a restart.",
	}, redisLock: true},
	{Info: Info{
		ID: "async-two-steps", Title: "秒杀优化 in two calls: deduct, then enqueue", ArticleCase: "黑马点评 秒杀优化 (阻塞队列 / a separate send)",
		Mechanism: "The admission script deducts and adds the buyer without the XADD; the shop sends the message in a second call. The crash fault kills the replica between the two.",
		Defect:    "A replica killed between the calls leaves a unit taken and a buyer marked with no message: no worker ever writes the order (undersold, 少卖).",
	}, redisLock: true},
	{Info: Info{
		ID: "async-no-claim", Title: "秒杀优化, workers that never claim", ArticleCase: "黑马点评 秒杀优化 (pending-list only on restart)",
		Mechanism: "As async-stream, but a worker only reads new entries and its own pending list at start, never XAUTOCLAIMs another's.",
		Defect:    "A worker killed mid-batch leaves its entries pending forever: orders missing (undersold, pending > 0) until a worker of the same consumer name starts again.",
	}, redisLock: true},
	{Info: Info{
		ID: "async-wrong-ack", Title: "秒杀优化, XACK on the wrong key", ArticleCase: "黑马点评 秒杀优化 (the copied consumer: XACK stream.orders)",
		Mechanism: "As async-stream, but the worker acknowledges on \"stream.orders\" beside the stream it read.",
		Defect:    "Orders are written, yet nothing is acknowledged: XPENDING grows with every sale, silently, until memory or a restart says so.",
	}, redisLock: true},
	{Info: Info{
		ID: "mongodb", Title: "MongoDB findAndModify lock (described, not run)", ArticleCase: "《常见分布式锁方案对比》, the MongoDB row",
		Mechanism: "findAndModify (findOneAndUpdate with upsert) on a lock document {_id: <sku>, owner, expiresAt}, matched only when absent or expired: one atomic document write per acquisition; release deletes it only while owner is ours; a TTL index sweeps expired documents.",
		Defect:    "The TTL monitor runs once a minute, so expiry is only exact if every acquisition compares expiresAt itself; no waiting (clients poll), no reentrancy, no fencing unless the document carries a counter, and with w:1 a primary failover can lose the lock document as Redis's replication can. Not a stage: no MongoDB server can be installed on these machines (it is not in Debian, and the npm and PyPI wrappers download binaries at run time), and lockstep ships no lock it cannot test.",
	}},
}

// catalogIndex maps a stage id to its catalog position.
var catalogIndex = func() map[string]int {
	m := make(map[string]int, len(catalog))
	for i, e := range catalog {
		m[e.ID] = i
	}
	return m
}()

// StageIDs lists every stage's id, in the order of the progression, as
// GET /api/stages does (available or not), so a scenario can be checked
// before a shop runs.
func StageIDs() []string {
	ids := make([]string, len(catalog))
	for i, e := range catalog {
		ids[i] = e.ID
	}
	return ids
}
