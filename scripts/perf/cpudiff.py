#!/usr/bin/env python3
"""Where each proxy's CPU per stream goes, side by side, from perf samples.

Usage: cpudiff.py FREQ NAME:STREAMS:PERF_DATA ...

Each PERF_DATA is a `perf record -e cpu-clock -F FREQ -g -p PID` of one arm
over STREAMS streams; an arm may come in several files (one per round). A
sample goes to the category of the frame nearest its leaf that names one:
a read syscall under the SSE parser is the network's, not the parser's, and
a park under it is the scheduler's. The table gives microseconds of CPU per
stream, and each arm's excess over the bare proxy (B) when B was recorded.
"""
import collections
import re
import subprocess
import sys

# In order of precedence within one frame; frames are tried leaf first.
CATEGORIES = [
    ("store (SQLite/PostgreSQL writer)", r"ttfx/internal/store\.|modernc\.org/(sqlite|libc)|^database/sql\.|jackc/pgx"),
    ("request log", r"^log/slog\.|ttfx/internal/telemetry\.\(\*RequestLog\)"),
    ("metrics and traces", r"prometheus/client_golang|go\.opentelemetry\.io|ttfx/internal/telemetry\."),
    ("classifier", r"ttfx/internal/(protocol|jsonscan|tokens)\."),
    ("SSE parser", r"ttfx/internal/sse\."),
    ("ttfx: relay, timeline, routing, auth", r"ttfx/internal/|ttfx/cmd/"),
    ("net/http, sockets, syscalls", r"^net/http|^net\.|^internal/poll\.|^syscall\.|^internal/runtime/syscall|^bufio\.|^io\.|^crypto/"),
    ("GC and allocation", r"^runtime\.(gc|mallocgc|scanobject|markroot|greyobject|bgsweep|bgscavenge|sweep|mark|wb|bulkBarrier|memclr|newobject|makeslice|growslice|heapSetType|nextFreeFast)"),
    ("scheduler and other runtime", r"^runtime\.|^internal/runtime"),
]
COMPILED = [(name, re.compile(p)) for name, p in CATEGORIES]
# Go packages without a slash in their path (others have one; kernel symbols have neither).
GO_STD = re.compile(r"^(main|sync|time|strings|context|errors|fmt|sort|slices|maps|unicode|strconv|bytes|math|reflect|os|log|encoding|mime|hash|path|iter|unique|weak|cmp|regexp|expvar|html)\.")
OTHER, KERNEL = "other Go code", "no Go frame (kernel, or C: nginx)"


# Work on goroutines of its own, whose syscalls and allocations are its too.
OWNERS = 2  # the first OWNERS categories claim a sample from any frame


def classify(frames):
    """frames: symbols, leaf first."""
    for name, rx in COMPILED[:OWNERS]:
        if any(rx.search(sym) for sym in frames):
            return name
    user = False
    for sym in frames:
        if sym.startswith("[") or sym in ("[unknown]",):
            continue
        for name, rx in COMPILED:
            if rx.search(sym):
                return name
        if "/" in sym or GO_STD.match(sym):
            user = True
    return OTHER if user else KERNEL


def samples(path):
    out = subprocess.run(["perf", "script", "-i", path, "-F", "ip,sym"],
                         capture_output=True, text=True, check=True).stdout
    frames = []
    for line in out.splitlines() + [""]:
        line = line.strip()
        if not line:
            if frames:
                yield frames
            frames = []
            continue
        parts = line.split(None, 1)
        frames.append(parts[1] if len(parts) > 1 else parts[0])


def main():
    freq = float(sys.argv[1])
    counts = collections.defaultdict(collections.Counter)
    streams = collections.Counter()
    order = []
    for spec in sys.argv[2:]:
        name, n, path = spec.split(":", 2)
        if name not in order:
            order.append(name)
        streams[name] += int(n)
        for fr in samples(path):
            counts[name][classify(fr)] += 1
    us = lambda a, c: counts[a][c] / freq / max(1, streams[a]) * 1e6
    cats = [c for c, _ in CATEGORIES] + [OTHER, KERNEL]
    head = f"{'µs of CPU per stream':38s}" + "".join(f"{a:>9s}" for a in order)
    excess = [a for a in order if a not in ("B", "N") and "B" in order]
    head += "".join(f"{a + '-B':>9s}" for a in excess)
    print(head)
    for c in cats + ["total"]:
        row = (lambda a: sum(us(a, k) for k in cats)) if c == "total" else (lambda a, c=c: us(a, c))
        if c != "total" and all(counts[a][c] == 0 for a in order):
            continue
        print(f"{c:38s}" + "".join(f"{row(a):9.0f}" for a in order) + "".join(f"{row(a) - row('B'):+9.0f}" for a in excess))
    print("(" + ", ".join(f"{a}: {sum(counts[a].values())} samples over {streams[a]} streams" for a in order) + ")")


if __name__ == "__main__":
    main()
