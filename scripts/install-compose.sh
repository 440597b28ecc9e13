#!/usr/bin/env bash
# Builds the docker compose v2 plugin from its Go module, at a pinned
# version, when the installed one is missing or another version. Not with
# go install: the module's exclude directives make it refuse; go build in
# the module's directory builds it as compose's own Makefile does.
# The binary is kept in $LOCKSTEP_CACHE (default /var/cache/lockstep), so a
# CI cache of that directory skips the build (about three minutes).
set -euo pipefail

compose_version=v2.40.3
cache="${LOCKSTEP_CACHE:-/var/cache/lockstep}"
plugins=/usr/local/lib/docker/cli-plugins
cached="$cache/compose/docker-compose-$compose_version"

installed_version() {
	"$plugins/docker-compose" version --short 2>/dev/null || true
}
[ "$(installed_version)" = "${compose_version#v}" ] && exit 0

sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
if [ ! -x "$cached" ]; then
	echo "building docker compose $compose_version into $cached (once; about three minutes)"
	dir="$(go mod download -json "github.com/docker/compose/v2@$compose_version" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
	[ -d "$dir" ] || { echo "go mod download gave no directory for compose $compose_version" >&2; exit 1; }
	$sudo mkdir -p "$(dirname "$cached")"
	tmp="$(mktemp -d)"
	trap 'rm -rf "$tmp"' EXIT
	(cd "$dir" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath \
		-ldflags "-w -X github.com/docker/compose/v2/internal.Version=$compose_version" \
		-o "$tmp/docker-compose" ./cmd)
	$sudo install -m 0755 "$tmp/docker-compose" "$cached"
fi
$sudo install -D -m 0755 "$cached" "$plugins/docker-compose"
