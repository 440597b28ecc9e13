#!/usr/bin/env bash
# Installs the system packages the test suite needs when they are missing.
# Idempotent and quiet: does nothing when everything is already there.
set -euo pipefail

need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || need+=(redis-tools)
# The workshop's failover scenario runs three Sentinels.
command -v redis-sentinel >/dev/null 2>&1 || need+=(redis-sentinel)
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || need+=(nginx)
# bench/shopcpu loads one shop with wrk (issue 37's measure of CPU per sale).
command -v wrk >/dev/null 2>&1 || need+=(wrk)
# Headless Chromium opens the workshop's report.html in cmd/workshop's test;
# a font so the screenshot it keeps shows text.
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || need+=(chromium)
[ -d /usr/share/fonts/truetype/dejavu ] || need+=(fonts-dejavu-core)
# deploy's tests run the compose set-up's observability stack for real:
# promtool and Prometheus, and the two exporters docker-compose.yml runs.
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
command -v prometheus-redis-exporter >/dev/null 2>&1 || need+=(prometheus-redis-exporter)
command -v prometheus-nginx-exporter >/dev/null 2>&1 || need+=(prometheus-nginx-exporter)
# The mysql and etcd stages' servers, which the tests and the workshop start
# on loopback ports of their own (Debian's MariaDB 10.11 and etcd 3.4).
command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || need+=(mariadb-server)
command -v etcd >/dev/null 2>&1 || need+=(etcd-server)
# The zookeeper stage's ensemble (Debian's ZooKeeper 3.8, on the JVM).
[ -f /usr/share/java/zookeeper.jar ] || need+=(zookeeper)
# deploy's engine test runs docker compose on a Docker engine (Debian's,
# 20.10), with stand-in images made from Debian packages on a debootstrap
# root.
command -v dockerd >/dev/null 2>&1 || [ -x /usr/sbin/dockerd ] || need+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || [ -x /usr/sbin/debootstrap ] || need+=(debootstrap)

# k6, built from its Go module once: GOPATH/bin keeps it for later runs.
k6_version=v1.8.1
install_k6() {
	local gobin
	gobin="$(go env GOPATH)/bin"
	if "$gobin/k6" version 2>/dev/null | grep -q "^k6 ${k6_version} "; then
		return
	fi
	echo "building k6 ${k6_version} into ${gobin} (once; about two minutes)"
	GOBIN="$gobin" GOFLAGS=-buildvcs=false go install "go.k6.io/k6@${k6_version}"
}
install_k6
# The docker compose v2 plugin, built from its Go module at a pinned version.
bash "$(dirname "$0")/install-compose.sh"

[ ${#need[@]} -eq 0 ] && exit 0

sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
echo "installing: ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >/dev/null
$sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
