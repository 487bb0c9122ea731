#!/usr/bin/env bash
# Side-by-side streaming overhead: direct (D), bare Go reverse proxy (B), nginx (N), ttfx (G, when a
# checkout is given). One mock upstream, interleaved rounds; per arm the added time to first text,
# the event gaps, the proxy process's CPU per stream and its RSS (and the anonymous part of it);
# ratios at the end, of the medians over rounds and round by round, what each ttfx arm's own
# records say of the same streams (GET /api/stats: its local phases, the upstream's headers, the
# first text's relay), and issue 15's targets for each ttfx arm, met or not.
# Usage: run.sh [PROJECT_CHECKOUT] [ROUNDS] [HIGH_CONCURRENCY] [BASELINE_CHECKOUT]
# With BASELINE_CHECKOUT (another checkout, e.g. a worktree of main) a fifth arm G0 runs that
# build in the same rounds, so that before and after are measured side by side under one load.
# HOLD=N first has each proxy, fresh after a few streams, hold N streams open (the mock paces
# their events 1 s apart) and reports the growth of its anonymous memory per held stream. The
# proxies keep that memory, so the RSS of rounds after it says little: run it with ROUNDS 0,
#   HOLD=2000 scripts/perf/run.sh . 0
# HOLD_PROMPT=BYTES gives the held streams' requests a user message that long (default 2).
# FIRST_AFTER=50ms makes the mock send its headers that long before its first event (time to
# headers then tells a proxy that forwards headers from one that holds them).
# UPSTREAM_TLS=1 makes the mock serve HTTPS with a self-signed certificate that every arm trusts
# (SSL_CERT_FILE): the Go proxies and the direct client then speak HTTP/2 to it, many streams on one
# connection, as they do to the providers; nginx speaks HTTP/1.1 over TLS (it has no HTTP/2
# upstreams). The clients' side stays plain HTTP/1.1. The direct client makes one request before
# each arm's streams, so that they share an open connection as the proxies' upstream streams do.
# PGO=1 builds the checkout's ttfx (G, not G0) with its profile, cmd/ttfx/ttfx.pgo: with a
# worktree of the same commit as baseline, a profile-guided build and a plain one side by side.
# PROFILE=1 records each proxy with `perf record` (Debian's linux-perf) in every round's
# HIGH_CONCURRENCY arm and prints where each one's CPU per stream goes, by category, and how much
# more each ttfx arm spends than the bare proxy in each (cpudiff.py); perf's sampling adds a
# little CPU to those arms' figures.
# C1_STREAMS=N runs N streams (default 15) one at a time in each round's one-stream arm, and
# C1_EVENTS=E makes those streams E events long (default the mock's 64, 1.3 s each): with
#   C1_STREAMS=100 C1_EVENTS=4 scripts/perf/run.sh . 3 200
# the one-stream percentiles come from 100 streams a round, not 15, in about the same time
# (15 samples make p50 move by tenths of a millisecond from round to round, and p99 their maximum).
# At HIGH_CONCURRENCY it also reports the first text of the streams that open their connections
# (the first HIGH) and of those on kept-alive connections (the next HIGH) apart: the overall p50
# lies between the two modes.
# Copied from the issue 15 harness (../shared/perf); run it from anywhere:
#   scripts/perf/run.sh . 3 200
set -u
here=$(cd "$(dirname "$0")" && pwd)
checkout=${1:-}
rounds=${2:-3}
high=${3:-200}
baseline=${4:-}
# PORT_BASE moves the five ports (base+1 … base+5), so two runs on one machine do not collide.
pb=${PORT_BASE:-9100}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
(cd "$here" && go build -o "$work/perfkit" .) || exit 1
command -v nginx >/dev/null || { echo "nginx is not installed (apt-get install nginx)"; exit 1; }
[ -z "${PROFILE:-}" ] || command -v perf >/dev/null || { echo "PROFILE needs perf (apt-get install linux-perf)"; exit 1; }
up=http
if [ -n "${UPSTREAM_TLS:-}" ]; then
  up=https
  "$work/perfkit" mock --listen 127.0.0.1:$((pb+1)) --events 64 --gap 20ms --first-after "${FIRST_AFTER:-0}" --tls-cert "$work/mock.pem" &
  for i in $(seq 50); do [ -s "$work/mock.pem" ] && break; sleep 0.1; done
  export SSL_CERT_FILE="$work/mock.pem"
else
  "$work/perfkit" mock --listen 127.0.0.1:$((pb+1)) --events 64 --gap 20ms --first-after "${FIRST_AFTER:-0}" &
fi
"$work/perfkit" bare --listen 127.0.0.1:$((pb+2)) --upstream $up://127.0.0.1:$((pb+1)) 2>/dev/null &
pid_B=$!
cat > "$work/nginx.conf" <<NG
worker_processes 1; daemon off; pid $work/nginx.pid; error_log $work/nginx.err;
events { worker_connections 16384; }
http { access_log off; client_body_temp_path $work; proxy_temp_path $work;
  upstream up { server 127.0.0.1:$((pb+1)); keepalive 512; }
  server { listen 127.0.0.1:$((pb+3));
    location / { proxy_pass $up://up; proxy_http_version 1.1; proxy_set_header Connection "";
                 proxy_buffering off; proxy_cache off; } } }
NG
nginx -c "$work/nginx.conf" &
pid_N=$!
arms="D=$up://127.0.0.1:$((pb+1)) B=http://127.0.0.1:$((pb+2)) N=http://127.0.0.1:$((pb+3))"
if [ -n "$checkout" ]; then
  (cd "$checkout" && go build ${PGO:+-pgo=cmd/ttfx/ttfx.pgo} -o "$work/ttfx" ./cmd/ttfx) || exit 1
  # The one-stream and the HIGH_CONCURRENCY arms use a key each, so that ttfx's own records of
  # each (read with the admin key once the rounds are done) can be summarised apart.
  cat > "$work/ttfx.yaml" <<Y
{"listen": "127.0.0.1:$((pb+4))", "store": "sqlite:$work/ttfx.db",
 "keys": [{"name": "perf", "role": "client", "group": "perf", "key_env": "PERF_KEY"},
          {"name": "perf-high", "role": "client", "group": "perf", "key_env": "PERF_KEY_HIGH"},
          {"name": "perf-admin", "role": "admin", "key_env": "PERF_ADMIN_KEY"}],
 "channels": [{"name": "mock", "protocol": "openai", "base_url": "$up://127.0.0.1:$((pb+1))", "key_env": "PERF_KEY", "models": ["*"]}]}
Y
  export PERF_KEY=perf-key-000000000001 PERF_KEY_HIGH=perf-key-000000000002 PERF_ADMIN_KEY=perf-admin-key-0000000001
  "$work/ttfx" serve --config "$work/ttfx.yaml" >"$work/ttfx.log" 2>&1 &
  pid_G=$!
  arms="$arms G=http://127.0.0.1:$((pb+4))"
fi
if [ -n "$baseline" ]; then
  (cd "$baseline" && go build -o "$work/ttfx0" ./cmd/ttfx) || exit 1
  sed -e "s/:$((pb+4))/:$((pb+5))/" -e "s#$work/ttfx.db#$work/ttfx0.db#" "$work/ttfx.yaml" > "$work/ttfx0.yaml"
  "$work/ttfx0" serve --config "$work/ttfx0.yaml" >"$work/ttfx0.log" 2>&1 &
  pid_G0=$!
  arms="$arms G0=http://127.0.0.1:$((pb+5))"
fi
ulimit -n 65536 2>/dev/null
sleep 2
# cpu_ticks PID: user+system clock ticks of PID and its children now running.
cpu_ticks() {
  local t=0 p
  for p in $1 $(pgrep -P "$1" 2>/dev/null); do
    [ -r /proc/$p/stat ] && t=$((t + $(awk '{print $14+$15}' /proc/$p/stat)))
  done
  echo $t
}
# status_kib PID FIELD: a /proc status field (VmRSS, RssAnon) of PID and its children, in KiB.
status_kib() {
  local t=0 p
  for p in $1 $(pgrep -P "$1" 2>/dev/null); do
    [ -r /proc/$p/status ] && t=$((t + $(awk -v f="$2:" '$1 == f {print $2}' /proc/$p/status)))
  done
  echo $t
}
rss_kib() { status_kib "$1" VmRSS; }
anon_kib() { status_kib "$1" RssAnon; }
hz=$(getconf CLK_TCK)
if [ -n "${HOLD:-}" ]; then
  for a in $arms; do
    name=${a%%=*}; url=${a#*=}/v1/chat/completions
    pidvar=pid_$name; pid=${!pidvar:-}
    [ -n "$pid" ] || continue
    "$work/perfkit" load --url "$url" --key perf-key-000000000001 -c 10 -n 10 --json >/dev/null
    sleep 1
    a0=$(anon_kib "$pid")
    "$work/perfkit" load --url "$url?hold=1" --key perf-key-000000000001 -c "$HOLD" -n "$HOLD" --prompt-bytes "${HOLD_PROMPT:-2}" --json >/dev/null &
    lp=$!
    sleep $((5 + HOLD / 200))
    a1=$(anon_kib "$pid")
    kill $lp 2>/dev/null; wait $lp 2>/dev/null
    echo "hold $name: $HOLD streams open: +$(( (a1 - a0) * 1024 / HOLD )) bytes of anonymous memory per stream (+$(( (a1 - a0) / 1024 )) MiB)"
    sleep 3
  done
fi
rounds_from=$(date -u +%Y-%m-%dT%H:%M:%S.%NZ)
for r in $(seq 1 "$rounds"); do
  for a in $arms; do
    name=${a%%=*}; url=${a#*=}/v1/chat/completions
    pidvar=pid_$name; pid=${!pidvar:-}
    for spec in "1 ${C1_STREAMS:-15} c1" "$high $((high*2)) chigh"; do
      set -- $spec
      q=; [ "$3" = c1 ] && [ -n "${C1_EVENTS:-}" ] && q="?events=$C1_EVENTS"
      before=0; [ -n "$pid" ] && before=$(cpu_ticks "$pid")
      prof=
      if [ -n "${PROFILE:-}" ] && [ -n "$pid" ] && [ "$3" = chigh ]; then
        perf record -q -e cpu-clock -F 999 -g -p "$(echo $pid $(pgrep -P "$pid") | tr " " ,)" -o "$work/perf.$name.$r.data" >/dev/null 2>&1 &
        prof=$!; sleep 0.3
      fi
      # Over HTTPS the direct client opens its HTTP/2 connection to the mock first, as each proxy
      # already holds its own: its streams then share it, and no arm's floor includes 200 TLS
      # handshakes that the proxies' upstream side never makes.
      warm=; [ -n "${UPSTREAM_TLS:-}" ] && [ "$name" = D ] && warm=--warm
      key=perf-key-000000000001; [ "$3" = chigh ] && key=perf-key-000000000002
      "$work/perfkit" load --url "$url$q" --key $key -c "$1" -n "$2" --label "$name" $warm --json >"$work/one.json"
      if [ -n "$prof" ]; then
        kill -INT "$prof"; wait "$prof"
        profiles="${profiles:-} $name:$2:$work/perf.$name.$r.data"
      fi
      cpu=None; rss=None; anon=None
      if [ -n "$pid" ]; then
        cpu=$(( $(cpu_ticks "$pid") - before )); cpu=$(python3 -c "print($cpu*1000/$hz/$2)"); rss=$(rss_kib "$pid"); anon=$(anon_kib "$pid")
      fi
      python3 -c "import json,sys; d=json.load(open('$work/one.json')); d['cpu_ms_per_stream']=$cpu; d['rss_kib']=$rss; d['anon_kib']=$anon; print(json.dumps(d))" >>"$work/$3.jsonl"
    done
  done
done
[ "$rounds" -gt 0 ] || exit 0
# Each ttfx arm's own records of the rounds, per concurrency: where it puts the time.
for a in $arms; do
  name=${a%%=*}
  case $name in G|G0) ;; *) continue ;; esac
  for k in perf:c1 perf-high:chigh; do
    curl -s -H "Authorization: Bearer $PERF_ADMIN_KEY" \
      "${a#*=}/api/stats?from=$rounds_from&key_name=${k%%:*}&fields=request_wait_ms,auth_ms,body_read_ms,distribution_ms,upstream_headers_ms,first_text_delta_ms,relay_lag_ms" \
      >"$work/own.$name.${k#*:}.json"
  done
done
if [ -n "${profiles:-}" ]; then
  echo "-- c=$high: where each proxy's CPU per stream goes (perf samples of every round's c=$high arm)"
  python3 "$here/cpudiff.py" 999 $profiles
fi
python3 - "$work" "$high" <<'PY'
import json, os, sys, statistics as st
work, high = sys.argv[1], sys.argv[2]
# Against an arm that added nothing (at or below direct, or within 50 µs of it) no ratio means anything.
FLOOR_MS = 0.05
def ratio(num, den):
    return f"{num/den:.2f}" if den >= FLOOR_MS else f"n/a (divisor {den:+.3f} ms)"

def load(f):
    arms = {}
    for l in open(f"{work}/{f}"):
        r = json.loads(l); arms.setdefault(r["label"], []).append(r)
    return arms
for f, title in (("c1.jsonl", "c=1"), ("chigh.jsonl", f"c={high}")):
    arms = load(f)
    med = lambda a, k, p: st.median(r[k].get(p, float("nan")) for r in arms[a])
    d50, d99 = med("D", "first_text_ms", "p50"), med("D", "first_text_ms", "p99")
    print(f"-- {title}: median over rounds; added = arm - direct")
    for a in arms:
        cpu = [r["cpu_ms_per_stream"] for r in arms[a] if r.get("cpu_ms_per_stream") is not None]
        rss = [r["rss_kib"] for r in arms[a] if r.get("rss_kib") is not None]
        anon = [r["anon_kib"] for r in arms[a] if r.get("anon_kib") is not None]
        # RSS less anonymous memory is mostly the binary's own pages
        # (code, read-only data, the function table), which grow with its
        # size, not with the streams.
        extra = f"; cpu/stream {st.median(cpu):.2f} ms; rss {max(rss)/1024:.0f} MiB (anonymous {max(anon)/1024:.0f})" if cpu else ""
        print(f"{a}: first_text p50 {med(a,'first_text_ms','p50'):.3f} ms (+{med(a,'first_text_ms','p50')-d50:.3f}), p99 {med(a,'first_text_ms','p99'):.3f} (+{med(a,'first_text_ms','p99')-d99:.3f}); gap p50 {med(a,'gap_ms','p50'):.3f} p99 {med(a,'gap_ms','p99'):.3f}; headers p50 {med(a,'headers_ms','p50'):.3f} p99 {med(a,'headers_ms','p99'):.3f}; errors {sum(r['errors'] for r in arms[a])}; events/s {st.median(r['events_per_s'] for r in arms[a]):.0f}{extra}")
    if f == "chigh.jsonl" and all(r.get("first_text_kept_ms") for a in arms for r in arms[a]):
        # With n = 2c, the streams' first text has two modes: the first c
        # streams each open a connection in one burst, the next c reuse
        # kept-alive ones. The overall p50 falls between the modes and moves
        # with either; each mode's p50 is the steadier figure.
        o50, k50 = med("D", "first_text_opening_ms", "p50"), med("D", "first_text_kept_ms", "p50")
        for a in arms:
            ao, ak = med(a, "first_text_opening_ms", "p50"), med(a, "first_text_kept_ms", "p50")
            print(f"{a}: first text p50 of the opening streams {ao:.3f} ms (+{ao-o50:.3f}), of the kept-alive ones {ak:.3f} (+{ak-k50:.3f})")
        for g in ("G", "G0"):
            if g in arms and "B" in arms:
                ro = ratio(med(g, "first_text_opening_ms", "p50")-o50, med("B", "first_text_opening_ms", "p50")-o50)
                rk = ratio(med(g, "first_text_kept_ms", "p50")-k50, med("B", "first_text_kept_ms", "p50")-k50)
                print(f"{g}: ratio added first text p50 ({g}-D)/(B-D): opening {ro}, kept-alive {rk}")
    for g in ("G", "G0"):
        if g not in arms or "B" not in arms:
            continue
        gb = ratio(med(g,"first_text_ms","p50")-d50, med("B","first_text_ms","p50")-d50)
        gb99 = ratio(med(g,"first_text_ms","p99")-d99, med("B","first_text_ms","p99")-d99)
        gn = ratio(med(g,"first_text_ms","p50")-d50, med("N","first_text_ms","p50")-d50)
        line = f"{g}: ratio added first text ({g}-D)/(B-D): p50 {gb}, p99 {gb99}; ({g}-D)/(N-D) p50 {gn}"
        cg = [r["cpu_ms_per_stream"] for r in arms[g] if r.get("cpu_ms_per_stream") is not None]
        cb = [r["cpu_ms_per_stream"] for r in arms["B"] if r.get("cpu_ms_per_stream") is not None]
        if cg and cb:
            line += f"; cpu per stream {g}/B {st.median(cg)/max(1e-9, st.median(cb)):.2f}"
        print(line)
        # The same ratios round by round (the arms of one round ran back to
        # back): how far one run's medians can be trusted.
        per = []
        for rg, rb, rd in zip(arms[g], arms["B"], arms["D"]):
            f50 = lambda r: r["first_text_ms"].get("p50", float("nan"))  # absent when every stream failed
            p50 = ratio(f50(rg)-f50(rd), f50(rb)-f50(rd))
            cpu = ""
            if rg.get("cpu_ms_per_stream") and rb.get("cpu_ms_per_stream"):
                cpu = f", cpu {rg['cpu_ms_per_stream']/rb['cpu_ms_per_stream']:.2f}"
            per.append(f"p50 {p50}{cpu}")
        print(f"{g}: per round, ({g}-D)/(B-D) and {g}/B: " + "; ".join(per))

# What each ttfx arm's own records say of the same streams (GET /api/stats over the rounds): the
# gateway's local part (before t0, authentication, body, routing), the upstream's, and the first
# text's relay to the client. The client-side figures above less these are what lies outside it.
own = [(g, c) for g in ("G", "G0") for c in ("c1", "chigh") if os.path.exists(f"{work}/own.{g}.{c}.json")]
if own:
    print("-- where each ttfx arm's own records put the time, all rounds (p50 / p99, ms; sketches, within 1 %)")
fields = (("request_wait_ms", "request wait"), ("auth_ms", "auth"), ("body_read_ms", "body read"),
          ("distribution_ms", "routing"), ("upstream_headers_ms", "upstream headers (t2-t1)"),
          ("first_text_delta_ms", "first text (t5)"), ("relay_lag_ms", "first text's relay"))
for g, c in own:
    title = "c=1" if c == "c1" else f"c={high}"
    try:
        d = json.load(open(f"{work}/own.{g}.{c}.json"))
        grp = d["groups"][0]
    except (ValueError, KeyError, IndexError, TypeError):
        print(f"{g} {title}: no answer from /api/stats: {open(f'{work}/own.{g}.{c}.json').read(200)!r}")
        continue
    parts = []
    for k, label in fields:
        v = grp["fields"].get(k) or {}
        if v.get("count"):
            parts.append(f"{label} {v['p50']:.3f} / {v['p99']:.3f}")
    print(f"{g} {title}, {grp['count']} records: " + "; ".join(parts))

# Issue 15's targets for each ttfx arm, from this run's medians over rounds (CPU: every round).
c1, ch = load("c1.jsonl"), load("chigh.jsonl")
def med(arms, a, k, p):
    return st.median(r[k].get(p, float("nan")) for r in arms[a])
def added(arms, a, p):
    return med(arms, a, "first_text_ms", p) - med(arms, "D", "first_text_ms", p)
def verdict(ok):
    return "yes" if ok else "no"
for g in ("G", "G0"):
    if g not in c1 or "B" not in c1:
        continue
    print(f"-- issue 15 targets, {g} (one run: quote several)")
    for p in ("p50", "p99"):
        ga, ba = added(c1, g, p), added(c1, "B", p)
        print(f"c=1 added first text {p} ÷B ≤ 1.3: {ratio(ga, ba)}" + (f" {verdict(ga <= 1.3 * ba)}" if ba >= FLOOR_MS else ""))
    for p in ("p50", "p99"):
        ga, ba = added(ch, g, p), added(ch, "B", p)
        print(f"c={high} added first text {p} ≤ B's: {ga:+.3f} against {ba:+.3f} ms {verdict(ga <= ba)}")
    ga, na = added(ch, g, "p50"), added(ch, "N", "p50")
    print(f"c={high} added first text p50 within 2× nginx's: {ga:+.3f} against {na:+.3f} ms " + (verdict(ga <= 2 * na) if na >= FLOOR_MS else "n/a (nginx added under 0.05 ms)"))
    rounds = [rg["cpu_ms_per_stream"] / rb["cpu_ms_per_stream"] for rg, rb in zip(ch[g], ch["B"]) if rg.get("cpu_ms_per_stream") and rb.get("cpu_ms_per_stream")]
    print(f"c={high} CPU per stream ÷B ≤ 1.1 in every round: {', '.join(f'{x:.2f}' for x in rounds)} {verdict(rounds and max(rounds) <= 1.1)}")
    rss = max(r["rss_kib"] for r in ch[g] if r.get("rss_kib") is not None) / 1024
    print(f"RSS after the c={high} arm ≤ 40 MiB: {rss:.0f} MiB {verdict(rss <= 40)}")
    for arms, title in ((c1, "c=1"), (ch, f"c={high}")):
        d = med(arms, g, "gap_ms", "p99") - med(arms, "D", "gap_ms", "p99")
        print(f"{title} p99 event gap within 1 ms of direct: {d:+.3f} ms {verdict(d <= 1)}")
    d = med(c1, g, "headers_ms", "p50") - med(c1, "D", "headers_ms", "p50")
    print(f"c=1 time to headers within 1 ms of direct (p50; one channel, so no fallback): {d:+.3f} ms {verdict(d <= 1)}")
PY
