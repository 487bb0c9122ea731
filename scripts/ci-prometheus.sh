#!/usr/bin/env bash
# ci-prometheus.sh — make the prometheus and promtool binaries available for the telemetry
# tests (internal/telemetry TestPrometheusScrapesGateway, TestDeployAgainstPrometheus,
# TestPromtoolRules; Debian's prometheus package ships promtool too).
#
# Run as root on a Debian machine. It installs Debian's prometheus package
# when the binary is missing, without recommended packages (the node
# exporter is not needed). The test starts its own prometheus with a temp
# configuration, storage and port, so no service is started here; where the
# package's own service does start (a machine with systemd), it listens on
# :9090 and does not disturb the test.
#
# It is idempotent: a second run finds the binary and only prints its version.
set -euo pipefail

log() { echo "ci-prometheus: $*" >&2; }

if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then
	if [ "$(id -u)" -ne 0 ]; then
		log "prometheus is missing and installing it needs root"
		exit 1
	fi
	log "installing prometheus from Debian's packages"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	apt-get install -y -qq --no-install-recommends prometheus >&2
fi

log "ready: $(prometheus --version 2>&1 | head -n 1); $(promtool --version 2>&1 | head -n 1)"
