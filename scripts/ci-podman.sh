#!/usr/bin/env bash
# ci-podman.sh — make podman available for the container image's test
# (deploy TestContainerImage: scripts/image.sh builds the image FROM scratch,
# nothing is pulled; the test inspects it and copies its binary out with
# podman create / podman cp, since containers need not be able to run here).
#
# Run as root on a Debian machine. Idempotent: a second run finds podman and
# only prints its version.
set -euo pipefail

log() { echo "ci-podman: $*" >&2; }

if ! command -v podman >/dev/null 2>&1; then
	if [ "$(id -u)" -ne 0 ]; then
		log "podman is missing and installing it needs root"
		exit 1
	fi
	log "installing podman from Debian's packages"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	apt-get install -y -qq podman >&2
fi

log "ready: $(podman --version 2>&1 | head -n 1)"
