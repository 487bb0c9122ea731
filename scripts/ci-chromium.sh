#!/usr/bin/env bash
# ci-chromium.sh — make Debian's Chromium ready for the dashboard's browser
# tests (internal/web, TestBrowser).
#
# Run as root on a Debian machine. It installs the chromium package (and a
# font, so that screenshots have text) when chromium is missing, then checks
# that it starts headless and renders a page. It is idempotent: a second run
# finds chromium in place and only checks it. The tests find /usr/bin/chromium
# on PATH; TTFX_CHROMIUM names another binary.
#
# The flags are the ones this network needs: no sandbox (root), no GPU, and
# none of Chromium's background connections, which a closed network refuses.
set -euo pipefail

log() { echo "ci-chromium: $*" >&2; }

if [ "$(id -u)" -ne 0 ]; then
	log "must run as root (it installs packages)"
	exit 1
fi

if ! command -v chromium >/dev/null 2>&1; then
	log "installing chromium from Debian's packages"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	apt-get install -y -qq chromium fonts-dejavu-core >&2
fi

profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
out=$(timeout 60 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
	--disable-background-networking --disable-component-update --disable-sync \
	--user-data-dir="$profile" --dump-dom 'data:text/html,<p id=ok>ttfx-chromium-ok</p>' 2>/dev/null || true)
if ! grep -q 'ttfx-chromium-ok' <<<"$out"; then
	log "chromium is installed but did not render a page headless"
	exit 1
fi
log "$(chromium --version 2>/dev/null) renders headless"
