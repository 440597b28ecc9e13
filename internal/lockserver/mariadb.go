package lockserver

import (
	"context"
	"fmt"
	"net"

	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// MariaDB is one MariaDB server (Debian's mariadb-server) on loopback,
// with grant tables off: any local client is root. For tests and the
// workshop's private server only.
type MariaDB struct {
	Addr string
	proc *process
}

// DSN is a go-sql-driver/mysql data source name for database db.
func (m *MariaDB) DSN(db string) string {
	return "root@tcp(" + m.Addr + ")/" + db + "?timeout=2s&readTimeout=5s&writeTimeout=5s"
}

// StartMariaDB initialises a data directory under dir and starts a server
// on it, returning once it accepts connections.
// on it, returning once it accepts connections; a server that exits first
// (its port taken meanwhile) is started again on another.
func StartMariaDB(ctx context.Context, dir string) (*MariaDB, error) {
	return retryExited(dir, func(dir string) (*MariaDB, error) { return startMariaDB(ctx, dir) })
}

func startMariaDB(ctx context.Context, dir string) (*MariaDB, error) {
	bin, err := lookPath("mariadbd")
	if err != nil {
		return nil, err
	}
	installDB, err := lookPath("mariadb-install-db")
	if err != nil {
		return nil, err
	}
	data, tmp := filepath.Join(dir, "data"), filepath.Join(dir, "tmp")
	// A temporary directory of its own: in the shared /tmp a CI run's
	// install lost its temporary table file while other servers started
	// ("Could not remove temporary table … error: 2").
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, err
	}
	init := exec.CommandContext(ctx, installDB, "--no-defaults", "--datadir="+data, "--tmpdir="+tmp, "--user=root",
		"--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve")
	if out, err := init.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("mariadb-install-db: %w\n%s", err, out)
	}
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	m := &MariaDB{Addr: loopback(ports[0])}
	m.proc, err = startProcess(bin, []string{"--no-defaults", "--datadir=" + data, "--tmpdir=" + tmp, "--user=root",
		"--bind-address=127.0.0.1", "--port=" + strconv.Itoa(ports[0]),
		"--socket=" + filepath.Join(dir, "mysqld.sock"), "--pid-file=" + filepath.Join(dir, "mysqld.pid"),
		"--skip-grant-tables", "--skip-name-resolve", "--skip-log-bin",
		// Small and quick to start: the workshop's lock table is tiny.
		"--innodb-buffer-pool-size=32M", "--innodb-log-file-size=16M",
		// Every replica's pool may be full at once under load.
		"--max-connections=2000",
	}, filepath.Join(dir, "mariadb.log"))
	if err != nil {
		return nil, err
	}
	if err := m.proc.waitUntil(ctx, "mariadbd", func(ctx context.Context) error { return dialMySQL(ctx, m.Addr) }); err != nil {
		m.Stop()
		return nil, err
	}
	return m, nil
}

// dialMySQL succeeds once the server sends its handshake.
func dialMySQL(ctx context.Context, addr string) error {
	d := net.Dialer{Timeout: time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(time.Second))
	buf := make([]byte, 16)
	if _, err := conn.Read(buf); err != nil {
		return err
	}
	return nil
}

// Pid is the server's process id.
func (m *MariaDB) Pid() int { return m.proc.Pid() }

// Stop kills the server; its data directory is the caller's.
func (m *MariaDB) Stop() {
	if m != nil {
		m.proc.kill()
	}
}
