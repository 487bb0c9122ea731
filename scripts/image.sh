#!/usr/bin/env bash
# Build the ttfx container image (Dockerfile) without pulling any base image:
# a static binary and the host's CA bundle go into a fresh build context, and
# the image is FROM scratch.
#
#   scripts/image.sh [TAG]        TAG defaults to ttfx:dev
#
# CONTAINER=docker uses docker instead of podman; CA_BUNDLE names another CA
# bundle (Fedora: /etc/pki/tls/certs/ca-bundle.crt); GOARCH another
# architecture. Needs Go and podman (Debian: apt-get install podman).
set -euo pipefail
cd "$(dirname "$0")/.."
tag=${1:-ttfx:dev}
engine=${CONTAINER:-podman}
ca=${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT

CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags='-s -w' -o "$ctx/ttfx" ./cmd/ttfx
cp "$ca" "$ctx/ca-certificates.crt"
mkdir -m 0750 "$ctx/data"
"$engine" build --quiet -t "$tag" -f Dockerfile "$ctx"
echo "built $tag"
