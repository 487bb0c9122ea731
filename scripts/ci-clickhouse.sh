#!/usr/bin/env bash
# ci-clickhouse.sh — make a local ClickHouse ready for the store's tests.
#
# Run as root on a Debian machine. It installs clickhouse-server from
# Debian's packages when it is missing (release 18.16: ttfx's ClickHouse SQL
# keeps to what that release has), writes a configuration under
# .ci-clickhouse/ in the work tree (data, logs, loopback only), starts the
# server in the background without systemd, waits for it to answer, creates
# the database ttfx, and prints one line for the caller to eval:
#
#   eval "$(bash scripts/ci-clickhouse.sh)"   # sets TTFX_TEST_CLICKHOUSE
#
# Everything else it says goes to stderr, so stdout stays evaluable. It is
# idempotent: a second run finds the server answering and prints the same
# line. Stop the server with: kill "$(cat .ci-clickhouse/server.pid)"
set -euo pipefail

log() { echo "ci-clickhouse: $*" >&2; }

cd "$(dirname "$0")/.."
dir="$PWD/.ci-clickhouse"
port="${TTFX_CLICKHOUSE_PORT:-9000}"
http_port="${TTFX_CLICKHOUSE_HTTP_PORT:-8123}"

if [ "$(id -u)" -ne 0 ]; then
	log "must run as root (it installs packages)"
	exit 1
fi

if ! command -v clickhouse-server >/dev/null 2>&1 && [ ! -x /usr/sbin/clickhouse-server ]; then
	log "installing clickhouse-server from Debian's packages"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	apt-get install -y -qq clickhouse-server clickhouse-client >&2
fi
server=$(command -v clickhouse-server || echo /usr/sbin/clickhouse-server)

answers() { clickhouse-client --host 127.0.0.1 --port "$port" --query "SELECT 1" >/dev/null 2>&1; }

if ! answers; then
	mkdir -p "$dir/data/" "$dir/tmp/" "$dir/log" "$dir/format_schemas/"
	cat >"$dir/users.xml" <<'XML'
<?xml version="1.0"?>
<yandex>
    <profiles><default><max_memory_usage>4000000000</max_memory_usage></default></profiles>
    <users>
        <default>
            <password></password>
            <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
            <profile>default</profile>
            <quota>default</quota>
        </default>
    </users>
    <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors>
        <result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time></interval></default></quotas>
</yandex>
XML
	cat >"$dir/config.xml" <<XML
<?xml version="1.0"?>
<yandex>
    <logger>
        <level>warning</level>
        <log>$dir/log/server.log</log>
        <errorlog>$dir/log/error.log</errorlog>
        <size>100M</size>
        <count>2</count>
    </logger>
    <listen_host>127.0.0.1</listen_host>
    <tcp_port>$port</tcp_port>
    <http_port>$http_port</http_port>
    <path>$dir/data/</path>
    <tmp_path>$dir/tmp/</tmp_path>
    <format_schema_path>$dir/format_schemas/</format_schema_path>
    <users_config>$dir/users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <timezone>UTC</timezone>
    <mark_cache_size>268435456</mark_cache_size>
    <max_concurrent_queries>100</max_concurrent_queries>
    <mlock_executable>false</mlock_executable>
    <!-- Parts compressed with ZSTD rather than LZ4, as docs/scale.md
         recommends: 18.16 has no per-column codecs, so this is where the
         codec is chosen (a requests row 195 -> 135 bytes at 1,000 records a
         minute). A case without conditions takes every part. -->
    <compression>
        <case>
            <method>zstd</method>
        </case>
    </compression>
</yandex>
XML
	log "starting $server on 127.0.0.1:$port (data in $dir/data)"
	# setsid: the server outlives this script and the CI step's process group.
	setsid "$server" --config-file="$dir/config.xml" >>"$dir/log/stdout.log" 2>&1 </dev/null &
	echo $! >"$dir/server.pid"
	for _ in $(seq 1 120); do
		if answers; then
			break
		fi
		sleep 0.5
	done
	if ! answers; then
		log "the server did not answer; its log:"
		tail -n 30 "$dir/log/error.log" >&2 || true
		exit 1
	fi
fi

clickhouse-client --host 127.0.0.1 --port "$port" --query "CREATE DATABASE IF NOT EXISTS ttfx" >&2
version=$(clickhouse-client --host 127.0.0.1 --port "$port" --query "SELECT version()")
log "ready: ClickHouse $version on 127.0.0.1:$port, database ttfx"
echo "export TTFX_TEST_CLICKHOUSE='clickhouse://127.0.0.1:$port/ttfx'"
