#!/usr/bin/env bash
# ci-postgres.sh — make a local PostgreSQL ready for the store's tests.
#
# Run as root on a Debian machine. It installs PostgreSQL from Debian's
# packages when it is missing, creates and starts a cluster, creates the role
# and database ttfx/ttfx, and prints one line for the caller to eval:
#
#   eval "$(bash scripts/ci-postgres.sh)"   # sets TTFX_TEST_POSTGRES
#
# Everything else it says goes to stderr, so stdout stays evaluable. It is
# idempotent: a second run finds everything in place and prints the same line.
set -euo pipefail

log() { echo "ci-postgres: $*" >&2; }

if [ "$(id -u)" -ne 0 ]; then
	log "must run as root (it installs packages and starts a cluster)"
	exit 1
fi

if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
	log "installing postgresql from Debian's packages"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	apt-get install -y -qq postgresql >&2
fi

version=$(ls /usr/lib/postgresql | sort -V | tail -n 1)
cluster=main

if ! pg_lsclusters -h | awk -v v="$version" -v c="$cluster" '$1 == v && $2 == c { found = 1 } END { exit !found }'; then
	log "creating cluster $version/$cluster"
	pg_createcluster "$version" "$cluster" >&2
fi

port=$(pg_lsclusters -h | awk -v v="$version" -v c="$cluster" '$1 == v && $2 == c { print $3 }')
status=$(pg_lsclusters -h | awk -v v="$version" -v c="$cluster" '$1 == v && $2 == c { print $4 }')
if [ "$status" != "online" ]; then
	log "starting cluster $version/$cluster on port $port"
	pg_ctlcluster "$version" "$cluster" start >&2
fi

# Wait until the server accepts connections (a fresh start takes a moment).
for _ in $(seq 1 60); do
	if runuser -u postgres -- pg_isready -q -h 127.0.0.1 -p "$port"; then
		break
	fi
	sleep 0.5
done
runuser -u postgres -- pg_isready -h 127.0.0.1 -p "$port" >&2

psql_admin() { runuser -u postgres -- psql -X -q -v ON_ERROR_STOP=1 -p "$port" "$@"; }

psql_admin -d postgres >&2 <<'SQL'
DO $$
BEGIN
	IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'ttfx') THEN
		CREATE ROLE ttfx LOGIN PASSWORD 'ttfx';
	END IF;
END
$$;
SQL
if [ "$(psql_admin -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = 'ttfx'")" != "1" ]; then
	log "creating database ttfx"
	psql_admin -d postgres -c "CREATE DATABASE ttfx OWNER ttfx" >&2
fi

log "ready: PostgreSQL $version on 127.0.0.1:$port, database ttfx, role ttfx"
echo "export TTFX_TEST_POSTGRES='postgres://ttfx:ttfx@127.0.0.1:$port/ttfx?sslmode=disable'"
