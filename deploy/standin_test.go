package deploy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// Stand-in images for the engine test: no registry is reachable where this
// project is built, so every image docker-compose.yml and the Dockerfile
// name is made here from Debian's package of the same version, on a
// minbase bookworm root with busybox (the Alpine userland the images'
// commands and healthchecks use: wget, adduser, nc), imported with docker
// import and tagged with the official name. They exist for the test only:
// the compose file keeps naming the official images users pull.

// standIn is the recipe of one stand-in image. What the official image
// declares (ENTRYPOINT, CMD, USER, WORKDIR, VOLUME, ENV) comes from its
// facts in deploy/images.json, so a stand-in cannot hide a VOLUME compose
// leaves uncovered or a user that cannot read a mount; its setup writes
// the entrypoint those facts name, behaving as the official one does for
// the commands compose gives it and reading only the variables the
// official one reads (TestStandInsReadWhatImagesRead).
type standIn struct {
	image    string   // the official image's name, which the stand-in takes
	packages []string // Debian packages installed in the root
	// hostFiles are copied from this machine into the root, path in the
	// root → path here: programs Debian does not package at the image's
	// version (the Go toolchain, k6 as scripts/install-deps.sh builds it).
	hostFiles func(t *testing.T) map[string]string
	setup     string // shell run in the root after the packages and files
	// version prints, run in the root, the version the image's tag names
	// (a package's, a program's); empty for alpine, whose tag names no
	// program.
	version string
	// versionOf, when set, is the version the stand-in's program is held
	// to instead of the tag's, and why: Debian packages no other.
	versionOf, versionWhy string
}

// stepDown runs the rest of an entrypoint as user, as the official
// images' gosu does (util-linux's setpriv, not busybox's: Debian has no
// gosu).
const stepDown = `exec /usr/bin/setpriv --reuid=%[1]s --regid=%[1]s --init-groups "$0" "$@"`

// standIns: one entry per image. Grafana has none: Debian does not package
// it, and a fake Grafana would prove nothing.
var standIns = []standIn{
	{
		image:    "redis:7.0.15-alpine",
		packages: []string{"redis-server", "redis-tools"},
		// The official entrypoint: options alone run redis-server; a
		// redis-server started as root gets the working directory (/data)
		// and runs as redis; anything else runs as given.
		setup: `mkdir -p /data
cat > /usr/local/bin/docker-entrypoint.sh <<'ENTRY'
#!/bin/sh
set -e
if [ "${1#-}" != "$1" ] || [ "${1%.conf}" != "$1" ]; then
	set -- redis-server "$@"
fi
if [ "$1" = redis-server ] && [ "$(id -u)" = 0 ]; then
	find . \! -user redis -exec chown redis '{}' +
	` + fmt.Sprintf(stepDown, "redis") + `
fi
um="$(umask)"
if [ "$um" = 0022 ]; then
	umask 0077
fi
exec "$@"
ENTRY
chmod 755 /usr/local/bin/docker-entrypoint.sh`,
		version: "dpkg-query -W -f '${Version}' redis-server",
	},
	{
		image:    "mariadb:10.11",
		packages: []string{"mariadb-server", "mariadb-client"},
		// The official entrypoint, as far as the compose file uses it: a
		// data directory initialised on first start, the root password and
		// the database from the environment.
		setup: `mkdir -p /run/mysqld /var/lib/mysql && chown mysql:mysql /run/mysqld /var/lib/mysql
cat > /usr/local/bin/docker-entrypoint.sh <<'ENTRY'
#!/bin/sh
set -e
if [ "$1" != mariadbd ]; then exec "$@"; fi
shift
if [ ! -d /var/lib/mysql/mysql ]; then
	chown mysql:mysql /var/lib/mysql
	mariadb-install-db --user=mysql --datadir=/var/lib/mysql --skip-test-db >/dev/null
	cat > /run/mysqld/init.sql <<SQL
CREATE USER IF NOT EXISTS 'root'@'%' IDENTIFIED BY '${MARIADB_ROOT_PASSWORD}';
GRANT ALL ON *.* TO 'root'@'%' WITH GRANT OPTION;
ALTER USER 'root'@'localhost' IDENTIFIED BY '${MARIADB_ROOT_PASSWORD}';
CREATE DATABASE IF NOT EXISTS ${MARIADB_DATABASE};
SQL
	chown mysql:mysql /run/mysqld/init.sql
	set -- --init-file=/run/mysqld/init.sql "$@"
fi
exec mariadbd --user=mysql --datadir=/var/lib/mysql --bind-address=0.0.0.0 --skip-name-resolve "$@"
ENTRY
chmod 755 /usr/local/bin/docker-entrypoint.sh`,
		version: "dpkg-query -W -f '${Version}' mariadb-server",
	},
	{
		image:    "zookeeper:3.8.0",
		packages: []string{"zookeeper"},
		// The official entrypoint, line for line where compose depends on
		// it: a zkServer.sh command started as root gets the three data
		// directories and runs as zookeeper; zoo.cfg in /conf, written once
		// from the image's variables, extra settings only from
		// ZOO_CFG_EXTRA (no maxSessionTimeout of its own: ZooKeeper's
		// default, 20 ticks, holds); myid in the data directory. Debian's
		// zkServer.sh reads /etc/zookeeper/conf, here /conf; started in
		// the foreground it is java on that zoo.cfg.
		setup: `mkdir -p /data /datalog /logs /conf /apache-zookeeper-3.8.0-bin
for f in /etc/zookeeper/conf_example/*; do
	case "${f##*/}" in zoo.cfg|myid) ;; *) cp "$f" /conf/ ;; esac
done
rm /etc/zookeeper/conf && ln -s /conf /etc/zookeeper/conf
chown zookeeper /data /datalog /logs /conf
cat > /usr/local/bin/zkServer.sh <<'ZKSERVER'
#!/bin/sh
if [ "$1" = start-foreground ]; then
	exec java -Xmx256m -cp /conf:/usr/share/java/zookeeper.jar -Dzookeeper.log.dir="$ZOO_LOG_DIR" org.apache.zookeeper.server.quorum.QuorumPeerMain "$ZOO_CONF_DIR/zoo.cfg"
fi
exec /usr/share/zookeeper/bin/zkServer.sh "$@"
ZKSERVER
cat > /docker-entrypoint.sh <<'ENTRY'
#!/bin/sh
set -e
if [ "$1" = zkServer.sh ] && [ "$(id -u)" = 0 ]; then
	chown -R zookeeper "$ZOO_DATA_DIR" "$ZOO_DATA_LOG_DIR" "$ZOO_LOG_DIR"
	` + fmt.Sprintf(stepDown, "zookeeper") + `
fi
if [ ! -f "$ZOO_CONF_DIR/zoo.cfg" ]; then
	config="$ZOO_CONF_DIR/zoo.cfg"
	{
		echo "dataDir=$ZOO_DATA_DIR"
		echo "dataLogDir=$ZOO_DATA_LOG_DIR"
		echo "tickTime=$ZOO_TICK_TIME"
		echo "initLimit=$ZOO_INIT_LIMIT"
		echo "syncLimit=$ZOO_SYNC_LIMIT"
		echo "autopurge.snapRetainCount=$ZOO_AUTOPURGE_SNAPRETAINCOUNT"
		echo "autopurge.purgeInterval=$ZOO_AUTOPURGE_PURGEINTERVAL"
		echo "maxClientCnxns=$ZOO_MAX_CLIENT_CNXNS"
		echo "standaloneEnabled=$ZOO_STANDALONE_ENABLED"
		echo "admin.enableServer=$ZOO_ADMINSERVER_ENABLED"
	} >> "$config"
	for server in ${ZOO_SERVERS:-server.1=localhost:2888:3888;2181}; do
		echo "$server" >> "$config"
	done
	if [ -n "$ZOO_4LW_COMMANDS_WHITELIST" ]; then
		echo "4lw.commands.whitelist=$ZOO_4LW_COMMANDS_WHITELIST" >> "$config"
	fi
	for entry in $ZOO_CFG_EXTRA; do
		echo "$entry" >> "$config"
	done
fi
if [ ! -f "$ZOO_DATA_DIR/myid" ]; then
	echo "${ZOO_MY_ID:-1}" > "$ZOO_DATA_DIR/myid"
fi
exec "$@"
ENTRY
chmod 755 /usr/local/bin/zkServer.sh /docker-entrypoint.sh`,
		version: "dpkg-query -W -f '${Version}' zookeeper",
	},
	{
		image:    "quay.io/coreos/etcd:v3.5.21",
		packages: []string{"etcd-server", "etcd-client"},
		setup: `ln -s /usr/bin/etcd /usr/local/bin/etcd && ln -s /usr/bin/etcdctl /usr/local/bin/etcdctl
mkdir -p /var/etcd /var/lib/etcd`,
		version:    "etcd --version",
		versionOf:  "3.4",
		versionWhy: "Debian packages etcd 3.4 only; the shop's client (3.5) speaks to both, as the lock tests run it against 3.4",
	},
	{
		image:    "nginx:1.22.1-alpine",
		packages: []string{"nginx"},
		// The official entrypoint runs its configuration scripts for an
		// nginx command only, which compose never gives (its commands are
		// sh -c), then the command.
		setup: `printf '#!/bin/sh\nset -e\nexec "$@"\n' > /docker-entrypoint.sh
chmod 755 /docker-entrypoint.sh`,
		version: "dpkg-query -W -f '${Version}' nginx",
	},
	{
		image:    "nginx/nginx-prometheus-exporter:0.11.0",
		packages: []string{"prometheus-nginx-exporter"},
		setup:    "ln -s prometheus-nginx-exporter /usr/bin/nginx-prometheus-exporter",
		version:  "dpkg-query -W -f '${Version}' prometheus-nginx-exporter",
	},
	{
		image:    "oliver006/redis_exporter:v1.45.0",
		packages: []string{"prometheus-redis-exporter"},
		setup:    "ln -s /usr/bin/prometheus-redis-exporter /redis_exporter",
		version:  "dpkg-query -W -f '${Version}' prometheus-redis-exporter",
	},
	{
		image:    "prom/prometheus:v2.42.0",
		packages: []string{"prometheus"},
		setup: `mkdir -p /prometheus && chown nobody:nogroup /prometheus
[ -e /bin/prometheus ] || ln -s /usr/bin/prometheus /bin/prometheus`,
		version: "dpkg-query -W -f '${Version}' prometheus",
	},
	{
		image: "grafana/k6:1.8.1",
		hostFiles: func(t *testing.T) map[string]string {
			return map[string]string{"/usr/bin/k6": tool(t, "k6", goBin())}
		},
		setup:   "useradd -u 12345 -m -d /home/k6 k6",
		version: "k6 version",
	},
	{
		image: "golang:1.26-alpine",
		// The build stage downloads modules over HTTPS, trusting what this
		// machine trusts (its egress may re-sign TLS).
		hostFiles: func(t *testing.T) map[string]string {
			return map[string]string{"/usr/local/go": goRoot(t), "/etc/ssl/certs/ca-certificates.crt": "/etc/ssl/certs/ca-certificates.crt"}
		},
		setup:   "mkdir -p /go/bin /go/src",
		version: "GOROOT=/usr/local/go GOTELEMETRY=off /usr/local/go/bin/go version",
	},
	{
		image: "alpine:3.22",
	},
}

// unavailableImages are images of docker-compose.yml without a stand-in:
// the engine test leaves their services out, and says so.
var unavailableImages = map[string]string{
	"grafana/grafana:11.6.14": "Grafana is not packaged for Debian",
}

// importChanges are the docker import --change instructions that give a
// stand-in what its official image declares.
func (f imageFacts) importChanges() []string {
	var changes []string
	quoted := func(args []string) string {
		data, _ := json.Marshal(args)
		return string(data)
	}
	if len(f.Entrypoint) > 0 {
		changes = append(changes, "ENTRYPOINT "+quoted(f.Entrypoint))
	}
	if len(f.Cmd) > 0 {
		changes = append(changes, "CMD "+quoted(f.Cmd))
	}
	if f.User != "" {
		changes = append(changes, "USER "+f.User)
	}
	if f.Workdir != "" {
		changes = append(changes, "WORKDIR "+f.Workdir)
	}
	if len(f.Volumes) > 0 {
		changes = append(changes, "VOLUME "+quoted(f.Volumes))
	}
	for _, kv := range f.Env {
		changes = append(changes, "ENV "+kv)
	}
	return changes
}

// baseRecipe names the root every stand-in starts from; changing it
// rebuilds the cached root and every stand-in.
const baseRecipe = "debootstrap --variant=minbase --include=busybox bookworm"

// alpineUserland puts busybox first on every stand-in's PATH, as on
// Alpine: the images' commands and healthchecks call its wget and sh.
// Debian's busybox has no adduser: Alpine's adduser -D [-u UID] [-h HOME]
// [-s SHELL] NAME is done by useradd.
const alpineUserland = `for a in $(busybox --list); do ln -sf /bin/busybox "/usr/local/bin/$a"; done
cat > /usr/local/bin/adduser <<'ADDUSER'
#!/bin/sh
set -e
args=-m
while getopts Du:h:s: opt; do
	case $opt in
	D) ;;
	u) args="$args -u $OPTARG" ;;
	h) args="$args -d $OPTARG" ;;
	s) args="$args -s $OPTARG" ;;
	*) echo "stand-in adduser: only -D, -u, -h, -s" >&2; exit 1 ;;
	esac
done
shift $((OPTIND - 1))
exec useradd $args -U "$1"
ADDUSER
chmod 755 /usr/local/bin/adduser`

// standInMark starts the comment (docker import --message) of every
// stand-in, followed by the hash of its recipe.
const standInMark = "lockstep stand-in "

func goRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func findStandIn(image string) (standIn, bool) {
	for _, s := range standIns {
		if s.image == image {
			return s, true
		}
	}
	return standIn{}, false
}

// recipeHash identifies what a stand-in is made of, the host files by
// path, size and modification time.
func (s standIn) recipeHash(t *testing.T, changes []string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n%q\n%s\n%s\n%s\n%q\n", baseRecipe, alpineUserland, s.image, s.packages, s.setup, s.version, s.versionOf, changes)
	if s.hostFiles != nil {
		for dst, src := range s.hostFiles(t) {
			st, err := os.Stat(src)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(h, "%s %s %d %d\n", dst, src, st.Size(), st.ModTime().UnixNano())
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// standInBuilder makes stand-ins in the engine's store, from a root kept
// in cacheDir.
type standInBuilder struct {
	e        *engine
	cacheDir string
	facts    map[string]imageFacts
}

// ensure makes sure image is there: the official image if the engine has
// it (a machine with a registry), else a current stand-in, built when
// missing or stale. It reports what it used.
func (b *standInBuilder) ensure(t *testing.T, image string) string {
	t.Helper()
	s, ok := findStandIn(image)
	if !ok {
		t.Fatalf("no stand-in for %s: add an entry to standIns (deploy/standin_test.go)", image)
	}
	changes := b.facts[image].importChanges()
	want := standInMark + s.recipeHash(t, changes)
	comment, err := b.e.output("image", "inspect", "--format", "{{.Comment}}", image)
	switch {
	case err == nil && strings.TrimSpace(comment) == want:
		return "stand-in (cached)" + s.versionNote()
	case err == nil && !strings.HasPrefix(comment, standInMark):
		return "the engine's own image"
	}
	start := time.Now()
	b.build(t, s, changes, want)
	return fmt.Sprintf("stand-in (built in %s)", time.Since(start).Round(time.Second)) + s.versionNote()
}

// versionNote says, when the stand-in's program is another version than
// the tag's, which and why.
func (s standIn) versionNote() string {
	if s.versionOf == "" {
		return ""
	}
	return fmt.Sprintf("; its program is %s, not %s: %s", s.versionOf, imageVersion(s.image), s.versionWhy)
}

func (b *standInBuilder) build(t *testing.T, s standIn, changes []string, comment string) {
	t.Helper()
	base := b.baseRoot(t)
	root, err := os.MkdirTemp(b.cacheDir, "standin-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(root)
	run(t, "tar", "-x", "-p", "-f", base, "-C", root)
	// Some packages' scripts need /proc (Java's postinst runs java).
	run(t, "mount", "-t", "proc", "proc", filepath.Join(root, "proc"))
	defer func() { _ = exec.Command("umount", "-l", filepath.Join(root, "proc")).Run() }()

	inRoot := func(script string) string {
		t.Helper()
		out, err := exec.Command("chroot", root, "sh", "-ec", script).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: in its root: %s: %v\n%s", s.image, script, err, out)
		}
		return string(out)
	}
	if len(s.packages) > 0 {
		// Name resolution for apt, and no service started by a package's
		// scripts; both gone before the import.
		run(t, "cp", "/etc/resolv.conf", filepath.Join(root, "etc", "resolv.conf"))
		writeFile(t, filepath.Join(root, "usr", "sbin", "policy-rc.d"), []byte("#!/bin/sh\nexit 101\n"))
		if err := os.Chmod(filepath.Join(root, "usr", "sbin", "policy-rc.d"), 0o755); err != nil {
			t.Fatal(err)
		}
		inRoot("export DEBIAN_FRONTEND=noninteractive; apt-get update -qq; apt-get install -y -qq --no-install-recommends " +
			strings.Join(s.packages, " ") + " >/dev/null; apt-get clean; rm -rf /var/lib/apt/lists/* /usr/sbin/policy-rc.d; : > /etc/resolv.conf")
	}
	if s.hostFiles != nil {
		for dst, src := range s.hostFiles(t) {
			target := filepath.Join(root, dst)
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				t.Fatal(err)
			}
			run(t, "cp", "-a", src, target)
		}
	}
	if s.setup != "" {
		inRoot(s.setup)
	}
	inRoot(alpineUserland)
	if s.version != "" {
		got, want := inRoot(s.version), imageVersion(s.image)
		if s.versionOf != "" {
			want = s.versionOf
		}
		if !sameVersion(want, got) {
			t.Fatalf("%s: stand-in has version %q (%s), not %s; change the image in docker-compose.yml and docs/compose.md, or the stand-in", s.image, strings.TrimSpace(got), s.version, want)
		}
	}

	args := []string{"import", "--message", comment}
	for _, c := range changes {
		args = append(args, "--change", c)
	}
	args = append(args, "-", s.image)
	tarCmd := exec.Command("tar", "-c", "--numeric-owner", "--exclude=./dev/*", "--exclude=./proc/*", "--exclude=./sys/*", "-C", root, ".")
	importCmd := b.e.command(args...)
	pipe, err := tarCmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	importCmd.Stdin = pipe
	if err := tarCmd.Start(); err != nil {
		t.Fatal(err)
	}
	out, importErr := importCmd.CombinedOutput()
	if err := tarCmd.Wait(); err != nil || importErr != nil {
		t.Fatalf("docker import %s: %v %v\n%s", s.image, err, importErr, out)
	}
}

// baseRoot returns the cached tar of the root every stand-in starts from,
// making it with debootstrap when missing (about a minute).
func (b *standInBuilder) baseRoot(t *testing.T) string {
	t.Helper()
	sum := sha256.Sum256([]byte(baseRecipe))
	path := filepath.Join(b.cacheDir, "rootfs-"+hex.EncodeToString(sum[:8])+".tar")
	if _, err := os.Stat(path); err == nil {
		return path
	}
	debootstrap := tool(t, "debootstrap", "/usr/sbin")
	dir, err := os.MkdirTemp(b.cacheDir, "debootstrap-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	start := time.Now()
	fields := strings.Fields(baseRecipe)
	run(t, debootstrap, append(fields[1:], filepath.Join(dir, "root"))...)
	run(t, "tar", "-c", "--numeric-owner", "-f", path+".tmp", "-C", filepath.Join(dir, "root"), ".")
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
	t.Logf("stand-ins' root: %s in %s", baseRecipe, time.Since(start).Round(time.Second))
	return path
}

var versionPattern = regexp.MustCompile(`\d+\.\d+(\.\d+)*`)

// imageVersion is the version an image's tag names: 7.0.15 of
// redis:7.0.15-alpine, 2.42.0 of prom/prometheus:v2.42.0.
func imageVersion(image string) string {
	return versionPattern.FindString(image[strings.LastIndex(image, ":")+1:])
}

// sameVersion tells whether a program's version output (a Debian
// version, 5:7.0.15-1~deb12u7; go1.26.8; k6 v1.8.1 (...)) is the tag's
// version, or one of its patch releases when the tag names a minor one.
func sameVersion(tag, output string) bool {
	got := versionPattern.FindString(output)
	return tag != "" && (got == tag || strings.HasPrefix(got, tag+"."))
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// TestStandInsCoverCompose: every image docker-compose.yml and the
// Dockerfile name has a stand-in, or a reason why not, and every stand-in
// stands in for one of them; so adding an image to the compose file fails
// here, without an engine, until its stand-in is one more entry.
func TestStandInsCoverCompose(t *testing.T) {
	named := map[string]bool{}
	for _, image := range composeImages(t) {
		named[image] = true
		_, ok := findStandIn(image)
		if _, unavailable := unavailableImages[image]; ok == unavailable {
			t.Errorf("%s: want either a stand-in in standIns or a reason in unavailableImages", image)
		}
	}
	for _, s := range standIns {
		if !named[s.image] {
			t.Errorf("stand-in for %s, which neither docker-compose.yml nor the Dockerfile names", s.image)
		}
	}
}

// TestStandInsReadWhatImagesRead: a stand-in's scripts read only the
// variables its official image reads or sets (deploy/images.json), so a
// compose setting the official image ignores is ignored by the stand-in
// too (the stand-in ZooKeeper once read ZOO_MAX_SESSION_TIMEOUT, which the
// official image does not: the engine test could not see sessions cut to
// 4 s). Upper-case names are variables of the environment; the scripts
// keep their own in lower case.
func TestStandInsReadWhatImagesRead(t *testing.T) {
	facts := readImageFacts(t)
	variable := regexp.MustCompile(`\$\{?([A-Z][A-Z0-9_]*)`)
	for _, s := range standIns {
		f := facts[s.image]
		for _, m := range variable.FindAllStringSubmatch(s.setup, -1) {
			if name := m[1]; !f.reads(name) && f.envDefault(name) == "" {
				t.Errorf("%s: the stand-in reads %s, which the official image does not read (deploy/images.json)", s.image, name)
			}
		}
	}
}

// checkStandIn: a stand-in declares what its official image declares and
// has the programs compose calls in it.
func (b *standInBuilder) checkStandIn(t *testing.T, image string) {
	t.Helper()
	f := b.facts[image]
	out, err := b.e.output("image", "inspect", "--format", "{{json .Config}}", image)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Entrypoint, Cmd []string
		User            string
		WorkingDir      string
		Volumes         map[string]struct{}
	}
	if err := json.Unmarshal([]byte(out), &cfg); err != nil {
		t.Fatal(err)
	}
	clean := func(p string) string {
		if p == "" {
			return ""
		}
		return path.Clean(p)
	}
	if !slices.Equal(cfg.Entrypoint, f.Entrypoint) || !slices.Equal(cfg.Cmd, f.Cmd) || cfg.User != f.User || clean(cfg.WorkingDir) != clean(f.Workdir) ||
		!slices.Equal(slices.Sorted(maps.Keys(cfg.Volumes)), slices.Sorted(slices.Values(f.Volumes))) {
		t.Errorf("%s: the stand-in declares %+v, its facts %+v", image, cfg, f)
	}
	progs := append(slices.Clone(f.Programs), f.Entrypoint...)
	if len(progs) == 0 {
		return
	}
	missing, err := b.e.output(append([]string{"run", "--rm", "--user", "0", "--entrypoint", "/bin/busybox", image,
		"sh", "-c", `for p; do command -v "$p" >/dev/null || echo "$p"; done`, "sh"}, progs...)...)
	if err != nil {
		t.Fatal(err)
	}
	if m := strings.Fields(missing); len(m) > 0 {
		t.Errorf("%s: the stand-in lacks %v, which the official image has", image, m)
	}
}

func TestSameVersion(t *testing.T) {
	for _, c := range []struct {
		image, output string
		want          bool
	}{
		{"redis:7.0.15-alpine", "5:7.0.15-1~deb12u7", true},
		{"prom/prometheus:v2.42.0", "2.42.0+ds-5+b6", true},
		{"oliver006/redis_exporter:v1.45.0", "1.45.0-2+b4", true},
		{"golang:1.26-alpine", "go version go1.26.8 linux/amd64", true},
		{"grafana/k6:1.8.1", "k6 v1.8.1 (commit/devel, go1.26.8, linux/amd64)", true},
		{"redis:7.0.15-alpine", "5:7.0.16-1", false},
		{"golang:1.26-alpine", "go version go1.261.0 linux/amd64", false},
		{"nginx:1.22.1-alpine", "1.22.10-1", false},
		{"alpine:latest", "3.22.0", false},
	} {
		if got := sameVersion(imageVersion(c.image), c.output); got != c.want {
			t.Errorf("%s, version %q: same %v, want %v", c.image, c.output, got, c.want)
		}
	}
}
