package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	_ "github.com/go-sql-driver/mysql" // to create the mysql stage's database

	"github.com/lockstep/lockstep/internal/lockserver"
)

// Modes of the --lock-servers flag.
const (
	lockServersAuto = "auto" // start each one that is installed
	lockServersOff  = "off"
)

// etcdMembers is the size of the workshop's etcd cluster: the smallest
// that survives losing its leader.
const etcdMembers = 3

// lockServers are the servers of the stages whose lock lives beside Redis;
// a nil one is not installed (or turned off), and its stage is unavailable.
type lockServers struct {
	etcd      *lockserver.Etcd
	mariadb   *lockserver.MariaDB
	zookeeper *lockserver.ZooKeeper
	// skipped says, per server, why it does not run.
	skipped []string
	// ordersFile is the embedded order table the shops share when no
	// MariaDB runs.
	ordersFile string
}

func startLockServers(ctx context.Context, mode, dir string) (*lockServers, error) {
	ls := &lockServers{ordersFile: filepath.Join(dir, "orders.db")}
	if mode == lockServersOff {
		ls.skipped = append(ls.skipped, "etcd, MariaDB and ZooKeeper: --lock-servers off")
		return ls, nil
	}
	if mode != lockServersAuto {
		return nil, fmt.Errorf("--lock-servers: %q is neither auto nor off", mode)
	}
	start := func(name string, f func(dir string) error) error {
		sub := filepath.Join(dir, name)
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return err
		}
		err := f(sub)
		if errors.Is(err, lockserver.ErrNotInstalled) {
			ls.skipped = append(ls.skipped, fmt.Sprintf("%s: not installed", name))
			return nil
		}
		return err
	}
	err := start("etcd", func(sub string) (err error) {
		ls.etcd, err = lockserver.StartEtcd(ctx, sub, etcdMembers)
		return err
	})
	if err == nil {
		err = start("mariadb", func(sub string) (err error) {
			ls.mariadb, err = lockserver.StartMariaDB(ctx, sub)
			if err != nil {
				return err
			}
			return createDatabase(ctx, ls.mariadb)
		})
	}
	if err == nil {
		err = start("zookeeper", func(sub string) (err error) {
			ls.zookeeper, err = lockserver.StartZooKeeper(ctx, sub, zookeeperMembers)
			return err
		})
	}
	if err != nil {
		ls.stop()
		return nil, err
	}
	return ls, nil
}

// zookeeperMembers is the size of the workshop's ZooKeeper ensemble.
const zookeeperMembers = 3

// mysqlDatabase holds the mysql stage's lock table.
const mysqlDatabase = "lockstep"

func createDatabase(ctx context.Context, m *lockserver.MariaDB) error {
	db, err := sql.Open("mysql", m.DSN(""))
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS "+mysqlDatabase); err != nil {
		return fmt.Errorf("mariadb: create database: %w", err)
	}
	return nil
}

// env is every shop's lock-server settings, set even when empty so the
// workshop's own environment cannot leak into the shops.
func (ls *lockServers) env() []string {
	var dsn, endpoints, zkServers string
	ordersFile := ls.ordersFile
	if ls.mariadb != nil {
		dsn, ordersFile = ls.mariadb.DSN(mysqlDatabase), ""
	}
	if ls.etcd != nil {
		endpoints = strings.Join(ls.etcd.Endpoints, ",")
	}
	if ls.zookeeper != nil {
		zkServers = strings.Join(ls.zookeeper.Servers, ",")
	}
	return []string{
		"LOCKSTEP_MYSQL_DSN=" + dsn, "LOCKSTEP_ORDERS_SQLITE=" + ordersFile,
		"LOCKSTEP_ETCD_ENDPOINTS=" + endpoints, "LOCKSTEP_ZOOKEEPER_SERVERS=" + zkServers,
	}
}

// orders says where the order stages keep their orders: MariaDB, or the
// embedded SQLite file, whose timings are not a server's.
func (ls *lockServers) orders() string {
	if ls.mariadb != nil {
		return "MariaDB at " + ls.mariadb.Addr
	}
	return "embedded SQLite " + ls.ordersFile + " (no MariaDB: pure Go, one file the shops share; its timings are not a server's)"
}

// describe is the line the workshop prints about them.
func (ls *lockServers) describe() string {
	var parts []string
	if ls.etcd != nil {
		parts = append(parts, fmt.Sprintf("etcd cluster of %d at %s", len(ls.etcd.Endpoints), strings.Join(ls.etcd.Endpoints, ", ")))
	}
	if ls.mariadb != nil {
		parts = append(parts, "MariaDB at "+ls.mariadb.Addr)
	}
	if ls.zookeeper != nil {
		parts = append(parts, fmt.Sprintf("ZooKeeper ensemble of %d at %s", len(ls.zookeeper.Servers), strings.Join(ls.zookeeper.Servers, ", ")))
	}
	parts = append(parts, ls.skipped...)
	return strings.Join(parts, "; ")
}

// pids are the lock servers' processes, by kind, for the report's CPU figures.
func (ls *lockServers) pids() map[string][]int {
	m := map[string][]int{}
	if ls.etcd != nil {
		for i := range ls.etcd.Endpoints {
			m["etcd"] = append(m["etcd"], ls.etcd.Pid(i))
		}
	}
	if ls.mariadb != nil {
		m["mariadb"] = []int{ls.mariadb.Pid()}
	}
	if ls.zookeeper != nil {
		for i := range ls.zookeeper.Servers {
			m["zookeeper"] = append(m["zookeeper"], ls.zookeeper.Pid(i))
		}
	}
	return m
}

func (ls *lockServers) stop() {
	if ls.etcd != nil {
		ls.etcd.Stop()
	}
	if ls.zookeeper != nil {
		ls.zookeeper.Stop()
	}
	ls.mariadb.Stop()
}

// ensemble is a lock server that elects a leader: what the leader-failover
// step kills.
type ensemble interface {
	KillLeader(context.Context) (string, error)
	WaitLeader(context.Context) (string, error)
	RestartKilled(context.Context) error
}

// ensembleOf is the ensemble the stage's lock lives on.
func (ls *lockServers) ensembleOf(stage string) (ensemble, error) {
	switch {
	case ls == nil:
	case stage == "etcd" && ls.etcd != nil:
		return ls.etcd, nil
	case stage == "zookeeper" && ls.zookeeper != nil:
		return ls.zookeeper, nil
	}
	return nil, fmt.Errorf("the %s stage's lock is on no ensemble with a leader: %w", stage, errSetUp)
}
