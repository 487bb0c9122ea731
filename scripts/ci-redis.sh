#!/usr/bin/env bash
# ci-redis.sh — make Debian's redis-server available for the shared
# admission limits' tests (internal/admission, internal/server): each test
# starts its own redis-server on a free loopback port (testenv.StartRedis),
# so no service is started here. The package's own service is stopped and
# disabled if apt started it: the tests need the binary, not a server on 6379.
#
# Run as root on a Debian machine. Idempotent: a second run finds the binary
# and only prints its version.
set -euo pipefail

log() { echo "ci-redis: $*" >&2; }

if ! command -v redis-server >/dev/null 2>&1; then
	if [ "$(id -u)" -ne 0 ]; then
		log "redis-server is missing and installing it needs root"
		exit 1
	fi
	log "installing redis-server from Debian's packages"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	apt-get install -y -qq redis-server >&2
	if command -v systemctl >/dev/null 2>&1; then
		systemctl disable --now redis-server >/dev/null 2>&1 || true
	fi
fi

log "ready: $(redis-server --version 2>&1 | head -n 1)"
