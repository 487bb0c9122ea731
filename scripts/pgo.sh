#!/bin/bash
# pgo.sh: regenerate cmd/ttfx/ttfx.pgo, the CPU profile for a
# profile-guided build of ttfx (docs/performance.md, Profile-guided optimisation):
#
#   go build -pgo=cmd/ttfx/ttfx.pgo ./cmd/ttfx
#
# It profiles the gateway under the work it does most: relaying streams. A
# simulator (ttfx sim) serves a model whose headers and first event come at
# 5 ms, then 200 tokens, one per event, from 10 ms at 2,000 a second.
# `ttfx bench` drives the gateway in each of the four APIs at 32 concurrent
# streams for 12 s, then non-streamed at 8 for 3 s. The gateway is a build
# with net/http/pprof (-tags pprof), and its CPU profile covers the whole
# load. Everything is on loopback; it takes about 70 s.
#
#   scripts/pgo.sh            # writes cmd/ttfx/ttfx.pgo
#   scripts/pgo.sh OUT.pprof  # writes elsewhere
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-cmd/ttfx/ttfx.pgo}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT

go build -pgo=off -tags pprof -o "$work/ttfx" ./cmd/ttfx

cat >"$work/profiles.yaml" <<'EOF'
profiles:
  pgo:
    headers_ms: 5
    first_event_ms: 5
    text_ms: 10
    visible_tokens: 200
    tps: 2000
EOF
cat >"$work/ttfx.yaml" <<EOF
listen: 127.0.0.1:19611
store: sqlite:$work/ttfx.db
keys:
  - {name: pgo, role: client, group: pgo, key_env: PGO_KEY}
channels:
  - {name: sim-openai, protocol: openai, base_url: http://127.0.0.1:19612, key_env: PGO_KEY, models: ["*"]}
  - {name: sim-anthropic, protocol: anthropic, base_url: http://127.0.0.1:19612, key_env: PGO_KEY, models: ["*"]}
  - {name: sim-gemini, protocol: gemini, base_url: http://127.0.0.1:19612, key_env: PGO_KEY, models: ["*"]}
EOF
export PGO_KEY=pgo-key-0000000000000001
"$work/ttfx" sim --listen 127.0.0.1:19612 --profiles "$work/profiles.yaml" >"$work/sim.log" 2>&1 &
TTFX_PPROF=127.0.0.1:19613 "$work/ttfx" serve --config "$work/ttfx.yaml" >"$work/gw.log" 2>&1 &
for i in $(seq 50); do
  curl -fsS -o /dev/null http://127.0.0.1:19613/debug/pprof/ 2>/dev/null && curl -fsS -o /dev/null http://127.0.0.1:19611/metrics 2>/dev/null && break
  sleep 0.2
done

load() {
  for api in openai.chat openai.responses anthropic gemini; do
    "$work/ttfx" bench --url http://127.0.0.1:19611 --api "$api" --model pgo --key-env PGO_KEY \
      --concurrency 32 --duration 12s --input-tokens 256:64 --progress off --out "$work/$api.json" >/dev/null
    "$work/ttfx" bench --url http://127.0.0.1:19611 --api "$api" --model pgo --key-env PGO_KEY \
      --concurrency 8 --duration 3s --stream=false --progress off --out "$work/$api.ns.json" >/dev/null
  done
}
curl -fsS -o "$work/cpu.pprof" "http://127.0.0.1:19613/debug/pprof/profile?seconds=62" &
prof=$!
sleep 1
load
wait "$prof"
# A load that failed in part profiles error paths instead of the relay.
python3 - "$work" <<'PY'
import glob, json, sys
bad = 0
for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    r = json.load(open(f))["summary"]["requests"]
    print(f"{f.rsplit('/', 1)[1]}: {r['ok']} ok, {r['failed']} failed")
    bad += r["failed"] > 0 or r["ok"] == 0
sys.exit(1 if bad else 0)
PY
cp "$work/cpu.pprof" "$out"
go tool pprof -top -nodecount 5 "$work/ttfx" "$out" 2>/dev/null | sed -n '3,6p'
echo "wrote $out"
