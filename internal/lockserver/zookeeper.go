package lockserver

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// zookeeperJar is Debian's zookeeper package's server jar; its manifest
// names the libraries it needs.
const zookeeperJar = "/usr/share/java/zookeeper.jar"

// ZooKeeper is a ZooKeeper ensemble on loopback: Debian's zookeeper 3.8, one
// JVM per member, each with its own data directory.
type ZooKeeper struct {
	// Servers are the members' client addresses.
	Servers []string
	members []*member
}

// StartZooKeeper starts an ensemble of n members under dir and waits until
// every member serves as leader or follower.
// A member that exits first (its port taken meanwhile) has the ensemble
// started again on other ports.
func StartZooKeeper(ctx context.Context, dir string, n int) (*ZooKeeper, error) {
	return retryExited(dir, func(dir string) (*ZooKeeper, error) { return startZooKeeper(ctx, dir, n) })
}

func startZooKeeper(ctx context.Context, dir string, n int) (*ZooKeeper, error) {
	java, err := lookPath("java")
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(zookeeperJar); err != nil {
		return nil, fmt.Errorf("%w: zookeeper: %w", ErrNotInstalled, err)
	}
	ports, err := freePorts(3 * n)
	if err != nil {
		return nil, err
	}
	var quorum strings.Builder
	for i := range n {
		fmt.Fprintf(&quorum, "server.%d=127.0.0.1:%d:%d\n", i+1, ports[n+i], ports[2*n+i])
	}
	z := &ZooKeeper{}
	for i := range n {
		name := fmt.Sprintf("zk%d", i+1)
		data := filepath.Join(dir, name)
		if err := os.MkdirAll(data, 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(data, "myid"), []byte(strconv.Itoa(i+1)+"\n"), 0o644); err != nil {
			return nil, err
		}
		// A short tick: sessions (2–20 ticks) and elections at loopback
		// speed, so a session timeout of a second or two is allowed.
		cfg := fmt.Sprintf("tickTime=200\ninitLimit=50\nsyncLimit=25\ndataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\n"+
			"admin.enableServer=false\n4lw.commands.whitelist=srvr\nmaxClientCnxns=0\nminSessionTimeout=400\nmaxSessionTimeout=60000\n%s", data, ports[i], quorum.String())
		cfgPath := filepath.Join(dir, name+".cfg")
		if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
			return nil, err
		}
		z.Servers = append(z.Servers, loopback(ports[i]))
		logPath := filepath.Join(dir, name+".log")
		// An election whose notifications went unanswered (a loaded
		// machine) waits twice as long before it sends them again, up to
		// 60 s by default: CI saw a leader elected 85 s after the old one
		// died. Capped at 1 s, and election connections time out as fast.
		z.members = append(z.members, &member{name: name, bin: java, logPath: logPath, args: []string{"-Xmx128m", "-XX:+UseSerialGC",
			"-Dzookeeper.fastleader.maxNotificationInterval=1000", "-Dzookeeper.cnxTimeout=1000",
			"-cp", zookeeperJar, "-Dzookeeper.log.dir=" + dir, "org.apache.zookeeper.server.quorum.QuorumPeerMain", cfgPath}})
	}
	if err := startMembers(ctx, "zookeeper", z.members, func(i int) func(context.Context) error { return serving(z.Servers[i]) }); err != nil {
		return nil, err
	}
	return z, nil
}

// serving asks a member's srvr four-letter word for its mode: a member
// serves once it is the leader or a follower of one (a one-member
// ensemble's only member: standalone).
func serving(addr string) func(context.Context) error {
	return func(ctx context.Context) error {
		mode, err := zkMode(ctx, addr)
		if err != nil {
			return err
		}
		if mode != "leader" && mode != "follower" && mode != "standalone" {
			return fmt.Errorf("mode %q", mode)
		}
		return nil
	}
}

// zkMode is a member's Mode line from srvr: leader, follower, standalone.
func zkMode(ctx context.Context, addr string) (string, error) {
	d := net.Dialer{Timeout: time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte("srvr")); err != nil {
		return "", err
	}
	sc := bufio.NewScanner(conn)
	for sc.Scan() {
		if mode, ok := strings.CutPrefix(sc.Text(), "Mode: "); ok {
			return mode, nil
		}
	}
	return "", fmt.Errorf("srvr of %s: no mode (%v)", addr, sc.Err())
}

// Leader is the index of the member that leads the ensemble now.
func (z *ZooKeeper) Leader(ctx context.Context) (int, error) {
	for i, addr := range z.Servers {
		if mode, err := zkMode(ctx, addr); err == nil && mode == "leader" {
			return i, nil
		}
	}
	return 0, fmt.Errorf("zookeeper: no leader among %v", z.Servers)
}

// Pid is member i's process id.
func (z *ZooKeeper) Pid(i int) int { return z.members[i].current().Pid() }

// Kill kills member i with SIGKILL, as a crash would.
func (z *ZooKeeper) Kill(i int) { z.members[i].current().kill() }

// Stop kills every member.
func (z *ZooKeeper) Stop() { stopMembers(z.members) }
