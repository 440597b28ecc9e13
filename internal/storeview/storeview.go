// Package storeview reads and writes, for the load generator, what the
// shops keep in their Redis: the stages' lock keys and their holders,
// each Cluster master's counters, a probe key. It implements
// loadgen.Stores (fault.Stores and shards.Reader), so that loadgen itself
// speaks HTTP only; the workshop, cmd/loadgen and the deploy tests build
// one from the set-up's addresses. The key names are the stores' own
// (segments.Tag, the stages' "lockstep:<stage>:{<tag>}:<suffix>").
package storeview

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/internal/keyslot"
	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/internal/loadgen/shards"
	"github.com/lockstep/lockstep/internal/redisclient"
	"github.com/lockstep/lockstep/segments"
)

// Addrs say where the shops keep their keys.
type Addrs struct {
	// Addr is the stock's Redis; Cluster, instead, the seeds of the Redis
	// Cluster the shops run on. Either may be empty (a Sentinel group's
	// master moves: the view then has no stock Redis).
	Addr     string
	Cluster  []string
	Password string
	// Holders is where the shops keep the track_holders counts when not
	// with the stock (--holders-redis-addr).
	Holders string
}

// View is the shops' Redis as the load generator reads it.
type View struct {
	addr    string
	rdb     redis.UniversalClient // the stock's; nil when unknown
	holders redis.UniversalClient // rdb's server by default
}

// Open connects to a; nil when a names no server at all. Close it.
func Open(a Addrs) *View {
	v := &View{addr: a.Addr}
	switch {
	case len(a.Cluster) > 0:
		v.rdb = redisclient.NewCluster(redisclient.Settings{Password: a.Password}, a.Cluster)
	case a.Addr != "":
		v.rdb = redisclient.New(redisclient.Settings{Password: a.Password}, a.Addr)
	}
	v.holders = v.rdb
	if a.Holders != "" {
		v.holders = redisclient.New(redisclient.Settings{Password: a.Password}, a.Holders)
	}
	if v.holders == nil {
		return nil
	}
	return v
}

// Close closes the view's clients; a nil View has none.
func (v *View) Close() error {
	if v == nil {
		return nil
	}
	var errs []error
	if v.holders != v.rdb {
		errs = append(errs, v.holders.Close())
	}
	if v.rdb != nil {
		errs = append(errs, v.rdb.Close())
	}
	return errors.Join(errs...)
}

// errNoStock: the view knows the holders' Redis but not the stock's.
var errNoStock = errors.New("no address of the stock's Redis")

// segmentCount is how many segments a stage splits a SKU into when reset
// with n (0: the shop's default, segments.DefaultCount); 0 for the stages
// that do not split it.
func segmentCount(stage string, n int) int {
	switch {
	case stage != "segmented" && stage != "segmented-atomic":
		return 0
	case n == 0:
		return segments.DefaultCount
	}
	return n
}

// key is a stage's key of tag that ends in suffix ("stock", "lock").
func key(stage, tag, suffix string) string {
	return "lockstep:" + stage + ":{" + tag + "}:" + suffix
}

// victimTag is the hash tag of the lock a fault step's victim sale takes:
// the SKU's, or on segmented its first segment's (each segment counts its
// own holders).
func victimTag(stage, sku string, n int) string {
	if stage == "segmented" {
		return segments.Tag(sku, 0, segmentCount(stage, n))
	}
	return sku
}

// LockKey is the key of the victim's lock (fault.Stores).
func (v *View) LockKey(stage, sku string, n int) string {
	return key(stage, victimTag(stage, sku, n), "lock")
}

// StockKey is the stock key of the SKU's first segment on the stages that
// split it, else of the SKU.
func (v *View) StockKey(stage, sku string, n int) string {
	if n = segmentCount(stage, n); n > 0 {
		return key(stage, segments.Tag(sku, 0, n), "stock")
	}
	return key(stage, sku, "stock")
}

// Holders reads the track_holders counts of the victim's lock.
func (v *View) Holders(ctx context.Context, stage, sku string, n int) (map[string]int64, error) {
	raw, err := v.holders.HGetAll(ctx, key(stage, victimTag(stage, sku, n), "holders")).Result()
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(raw))
	for name, s := range raw {
		if out[name], err = strconv.ParseInt(s, 10, 64); err != nil {
			return nil, fmt.Errorf("holders of %s: %w", name, err)
		}
	}
	return out, nil
}

// ForgetHolder drops replica's count among the victim lock's holders.
func (v *View) ForgetHolder(ctx context.Context, stage, sku string, n int, replica string) error {
	err := v.holders.HDel(ctx, key(stage, victimTag(stage, sku, n), "holders"), replica).Err()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	return err
}

// TTL is how long key has left in the stock's Redis.
func (v *View) TTL(ctx context.Context, key string) (time.Duration, error) {
	if v.rdb == nil {
		return 0, errNoStock
	}
	return v.rdb.PTTL(ctx, key).Result()
}

// LockKeys lists the stage's keys that hold a lock, with their TTLs; none
// when the view has no stock Redis.
func (v *View) LockKeys(ctx context.Context, stage string) ([]report.LockKey, error) {
	if v.rdb == nil {
		return nil, nil
	}
	var (
		mu   sync.Mutex
		keys []string
	)
	// Lock keys end in ":lock" (lockstep:setnx:{sku-1}:lock); a stage's
	// other keys hold stock and accounting. On a cluster every master
	// holds some.
	err := forEachMaster(ctx, v.rdb, func(ctx context.Context, node redis.Cmdable) error {
		iter := node.Scan(ctx, 0, "lockstep:"+stage+":*", 100).Iterator()
		for iter.Next(ctx) {
			if strings.HasSuffix(iter.Val(), ":lock") {
				mu.Lock()
				keys = append(keys, iter.Val())
				mu.Unlock()
			}
		}
		return iter.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("scan: %w", err)
	}
	slices.Sort(keys)
	out := make([]report.LockKey, 0, len(keys))
	for _, k := range keys {
		ttl, err := v.rdb.PTTL(ctx, k).Result()
		if err != nil {
			return nil, fmt.Errorf("pttl %s: %w", k, err)
		}
		if ttl == -2 { // gone since the scan
			continue
		}
		if ttl > 0 {
			ttl /= time.Millisecond
		}
		out = append(out, report.LockKey{Key: k, TTLMS: int64(ttl)})
	}
	return out, nil
}

// WriteProbe writes a key of its own, for an hour, in the stock's Redis,
// and returns once that server has written it to its append-only file
// when it keeps one. Under appendfsync everysec Redis answers a write
// before writing it while its last fsync still runs (for up to 2 s): a
// probe lost that way would read as a server the kill emptied.
func (v *View) WriteProbe(ctx context.Context) (string, error) {
	if v.rdb == nil {
		return "", fmt.Errorf("a redis-restart step needs the stock's Redis address, to tell what the kill took: %w", errNoStock)
	}
	probe := "lockstep:loadgen:probe:{" + rand.Text() + "}"
	if err := v.rdb.Set(ctx, probe, 1, time.Hour).Err(); err != nil {
		return "", err
	}
	var node redis.UniversalClient = v.rdb
	if cluster, ok := v.rdb.(*redis.ClusterClient); ok {
		master, err := cluster.MasterForKey(ctx, probe)
		if err != nil {
			return "", fmt.Errorf("the probe's master: %w", err)
		}
		node = master
	}
	return probe, appendOnlyWritten(ctx, node)
}

// appendOnlyWritten waits until rdb's server has written to its
// append-only file every write it had taken in when asked (at once when
// it keeps no such file). It judges by the file's size, not by an empty
// buffer: under load the buffer is seldom empty.
func appendOnlyWritten(ctx context.Context, rdb redis.UniversalClient) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	target := int64(-1) // the file's size once it holds what was buffered
	for {
		info, err := rdb.InfoMap(ctx, "persistence").Result()
		if err != nil {
			return fmt.Errorf("info persistence: %w", err)
		}
		p := info["Persistence"]
		if p["aof_enabled"] != "1" {
			return nil
		}
		size, errSize := strconv.ParseInt(p["aof_current_size"], 10, 64)
		buffered, errBuffered := strconv.ParseInt(p["aof_buffer_length"], 10, 64)
		if err := errors.Join(errSize, errBuffered); err != nil {
			return fmt.Errorf("info persistence: %w", err)
		}
		if target < 0 {
			target = size + buffered
		}
		if size >= target {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the append-only file is at %d bytes, short of %d: %w", size, target, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// ProbeKept says whether the probe is still there, and deletes it.
func (v *View) ProbeKept(ctx context.Context, probe string) (bool, error) {
	if v.rdb == nil {
		return false, errNoStock
	}
	kept, err := v.rdb.Exists(ctx, probe).Result()
	if err != nil {
		return false, err
	}
	v.rdb.Del(ctx, probe)
	return kept == 1, nil
}

// LoadSKU is the SKU a failover's load buys, beside sku: on a Redis
// Cluster one whose keys live on the master of lockKey's slot, so the
// load sees that master's outage.
func (v *View) LoadSKU(ctx context.Context, sku, lockKey string) (string, error) {
	sku += "-load"
	cluster, ok := v.rdb.(*redis.ClusterClient)
	if !ok {
		return sku, nil
	}
	// The slot map as a node has it now, not the client's cached state:
	// after an earlier row's failover that may name the killed master, and
	// go-redis answers a slot it has no node for with a random node (a CI
	// run found no SKU "on" such a replica).
	slots, err := cluster.ClusterSlots(ctx).Result()
	if err != nil {
		return "", fmt.Errorf("cluster slots: %w", err)
	}
	masterOf := func(key string) string {
		slot := keyslot.Of(key)
		for _, r := range slots {
			if slot >= r.Start && slot <= r.End && len(r.Nodes) > 0 {
				return r.Nodes[0].Addr
			}
		}
		return ""
	}
	master := masterOf(lockKey)
	if master == "" {
		return "", fmt.Errorf("no master serves %s's slot %d (cluster slots: %v)", lockKey, keyslot.Of(lockKey), slots)
	}
	for i := range 10000 {
		candidate := fmt.Sprintf("%s-%d", sku, i)
		if masterOf("{"+candidate+"}") == master {
			return candidate, nil
		}
	}
	return "", fmt.Errorf("no load SKU on %s, the master of %s", master, lockKey)
}

// ShardCounters reads every master's commands and CPU time (shards.Reader);
// nil, nil off a cluster.
func (v *View) ShardCounters(ctx context.Context) (map[string]shards.Counters, error) {
	cluster, ok := v.rdb.(*redis.ClusterClient)
	if !ok {
		return nil, nil
	}
	var mu sync.Mutex
	out := map[string]shards.Counters{}
	err := cluster.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		info, err := node.InfoMap(ctx, "stats", "cpu").Result()
		if err != nil {
			return err
		}
		commands, err := strconv.ParseInt(info["Stats"]["total_commands_processed"], 10, 64)
		if err != nil {
			return fmt.Errorf("total_commands_processed: %w", err)
		}
		sys, err1 := strconv.ParseFloat(info["CPU"]["used_cpu_sys"], 64)
		user, err2 := strconv.ParseFloat(info["CPU"]["used_cpu_user"], 64)
		if err1 != nil || err2 != nil {
			return fmt.Errorf("used_cpu: %v %v", err1, err2)
		}
		mu.Lock()
		out[node.Options().Addr] = shards.Counters{Commands: commands, CPU: sys + user}
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// SegmentMasters says which of sku's segments each master holds
// (shards.Reader); nil off a cluster or on a stage that does not split
// the stock.
func (v *View) SegmentMasters(ctx context.Context, stage, sku string, n int) map[string][]int {
	cluster, ok := v.rdb.(*redis.ClusterClient)
	n = segmentCount(stage, n)
	if !ok || n == 0 {
		return nil
	}
	out := map[string][]int{}
	for i := range n {
		if master, err := cluster.MasterForKey(ctx, key(stage, segments.Tag(sku, i, n), "stock")); err == nil {
			addr := master.Options().Addr
			out[addr] = append(out[addr], i)
		}
	}
	return out
}

// Describe says what the stock's Redis is (INFO server), for the report.
func (v *View) Describe(ctx context.Context) report.Component {
	if v.rdb == nil {
		return report.Component{Kind: "unknown", Note: "no Redis address given"}
	}
	info, err := v.rdb.Info(ctx, "server").Result()
	if err != nil {
		return report.Component{Kind: "unknown", Addr: v.addr, Note: err.Error()}
	}
	c := report.Component{Kind: "redis-server", Addr: v.addr}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			c.Version = v
		}
	}
	return c
}

// forEachMaster runs f on every master of a cluster client, on the one
// Redis of any other client.
func forEachMaster(ctx context.Context, rdb redis.UniversalClient, f func(context.Context, redis.Cmdable) error) error {
	if cluster, ok := rdb.(*redis.ClusterClient); ok {
		return cluster.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error { return f(ctx, node) })
	}
	return f(ctx, rdb)
}
