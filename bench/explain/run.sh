#!/usr/bin/env bash
# Benchmark `oomkit explain` against `grep -c "out of memory"` on big training logs.
#
#   bash bench/explain/run.sh              # the 1 GiB log (generated on first use)
#   bash bench/explain/run.sh 256 1024     # several sizes, to show scaling
#
# Environment:
#   RUNS=5            timed runs per command, interleaved a b c a b c ...; the
#                     best (minimum) wall time of each is kept
#   OOMKIT=path       benchmark this binary instead of building target/release/oomkit
#   GEN_ARGS, TAG     extra gen_log.py arguments for a variant, and a file-name tag
#                     for it, e.g. GEN_ARGS="--kv-metrics-every 25" TAG=kv25
#                     (bench/data/train_256m_kv25.log: an anchor phrase every ~25 lines)
#   CARGO_TARGET_DIR  honoured when building
#
# For each size it generates bench/data/train_<N>m.log (+ .manifest.json) with
# bench/explain/gen_log.py if missing, reads it once to warm the page cache
# (nothing is dropped from the cache: we cannot, and a warm cache is the
# fair comparison for both tools), then times
#   (a) grep -c "out of memory" FILE            in the caller's locale
#   (b) LC_ALL=C grep -c "out of memory" FILE
#   (c) oomkit explain --format json FILE        (exit status 0 expected)
# and prints a markdown table with the best time, throughput (GB/s, 1 GB =
# 10^9 bytes), the ratio to each grep and peak RSS (GNU time -v). Finally it
# checks that both greps count the "out of memory" lines the generator
# reports and that oomkit found exactly the 5 inserted OOM events.
# Exit status: 0 all checks passed, 1 a check failed, 2 setup error.
set -euo pipefail

cd "$(dirname "$0")/../.."
ROOT=$PWD
DATA=bench/data
RUNS=${RUNS:-5}
SIZES=("$@")
[ ${#SIZES[@]} -eq 0 ] && SIZES=(1024)
NEEDLE="out of memory"

die() { echo "run.sh: $*" >&2; exit 2; }

command -v python3 >/dev/null || die "python3 is required"
if [ ! -x /usr/bin/time ]; then
    echo "# /usr/bin/time missing: installing GNU time" >&2
    if [ "$(id -u)" = 0 ]; then
        apt-get install -y time >/dev/null 2>&1 || { apt-get update >/dev/null 2>&1 && apt-get install -y time >/dev/null 2>&1; } \
            || die "could not install GNU time (apt-get install time)"
    else
        die "GNU time (/usr/bin/time) is required: apt-get install time"
    fi
fi

# ---- build -----------------------------------------------------------------
if [ -z "${OOMKIT:-}" ]; then
    for attempt in 1 2 3; do
        if cargo build --release --quiet; then break; fi
        [ "$attempt" = 3 ] && die "cargo build --release failed 3 times"
        echo "# cargo build failed (tree mid-edit?); retrying in 60 s" >&2
        sleep 60
    done
    OOMKIT="${CARGO_TARGET_DIR:-$ROOT/target}/release/oomkit"
fi
[ -x "$OOMKIT" ] || die "no oomkit binary at $OOMKIT"

# ---- timing helpers ----------------------------------------------------------
# Not hyperfine, even when installed: it sends the command's stdout to
# /dev/null, and GNU grep (>= 2.27) notices that and stops at the first match
# like `grep -q` (1 GiB "counted" in 2 ms). Every command here writes its
# stdout to a real file instead.
SINK=$(mktemp "${TMPDIR:-/tmp}/oomkit-bench.XXXXXX")
trap 'rm -f "$SINK"' EXIT

# time_once CMD...: wall seconds of one run of the command (stdout to a
# scratch file, stderr to /dev/null), timed with bash's $EPOCHREALTIME so no
# extra process is started around the command.
time_once() {
    local t0 t1
    t0=$EPOCHREALTIME
    "$@" >"$SINK" 2>/dev/null || true
    t1=$EPOCHREALTIME
    echo "$t0 $t1"
}

# best_of TIMES...: the smallest of "t0 t1" pairs, in seconds.
best_of() {
    python3 -c 'import sys; a = sys.argv[1:]; print("%.4f" % min(float(a[i + 1]) - float(a[i]) for i in range(0, len(a), 2)))' "$@"
}

# peak_rss_kb CMD...: maximum resident set size in KiB (GNU time -v).
peak_rss_kb() {
    local tf out
    tf=$(mktemp)
    /usr/bin/time -v -o "$tf" "$@" >"$SINK" 2>/dev/null || true
    out=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$tf")
    rm -f "$tf"
    echo "${out:-?}"
}

# ---- machine -------------------------------------------------------------------
CPU=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)
MEM=$(awk '/^MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)
echo "## oomkit explain vs grep -c \"$NEEDLE\""
echo
echo "- date: $(date -u +%Y-%m-%dT%H:%MZ)"
echo "- machine: $(nproc) cores ($CPU), $MEM RAM, $(uname -sr)"
echo "- $(grep --version | head -1), locale for (a): LANG=${LANG:-unset} LC_ALL=${LC_ALL:-unset}"
echo "- oomkit: $OOMKIT ($("$OOMKIT" --version 2>/dev/null || echo '?')), tree $(git rev-parse --short HEAD 2>/dev/null || echo '?')$( [ -n "$(git --no-optional-locks status --porcelain --untracked-files=no 2>/dev/null)" ] && echo ' + uncommitted changes')"
echo "- load average before the runs: $(cut -d' ' -f1-3 /proc/loadavg) (other processes share these $(nproc) cores)"
echo "- timing: best of $RUNS interleaved wall-clock runs (bash loop timed with \$EPOCHREALTIME; stdout to a file, never /dev/null), warm page cache; peak RSS from /usr/bin/time -v"
echo

status=0
SCALING=()
for size in "${SIZES[@]}"; do
    file="$DATA/train_${size}m${TAG:+_$TAG}.log"
    manifest="$file.manifest.json"
    if [ ! -s "$file" ] || [ ! -s "$manifest" ]; then
        echo "# generating $file ($size MiB)" >&2
        # shellcheck disable=SC2086 # GEN_ARGS is a list of words
        python3 bench/explain/gen_log.py --size-mb "$size" ${GEN_ARGS:-} --out "$file" >&2
    fi
    bytes=$(stat -c %s "$file")
    wc -l <"$file" >/dev/null # warm the page cache (wc -l must read every byte)

    cmd_a=(grep -c "$NEEDLE" "$file")
    cmd_b=(env LC_ALL=C grep -c "$NEEDLE" "$file")
    cmd_c=("$OOMKIT" explain --format json "$file")

    # One untimed run of each for the checks.
    count_a=$("${cmd_a[@]}" || true)
    count_b=$("${cmd_b[@]}" || true)
    json="${file%.log}.oomkit.json"
    set +e
    "${cmd_c[@]}" >"$json" 2>"$json.stderr"
    rc_c=$?
    set -e

    # Interleaved (a b c a b c ...) so that load from other processes hits
    # all three alike; the best of $RUNS is kept for each.
    times_a=() times_b=() times_c=()
    for ((i = 0; i < RUNS; i++)); do
        times_a+=($(time_once "${cmd_a[@]}"))
        times_b+=($(time_once "${cmd_b[@]}"))
        times_c+=($(time_once "${cmd_c[@]}"))
    done
    t_a=$(best_of "${times_a[@]}")
    t_b=$(best_of "${times_b[@]}")
    t_c=$(best_of "${times_c[@]}")
    r_a=$(peak_rss_kb "${cmd_a[@]}")
    r_b=$(peak_rss_kb "${cmd_b[@]}")
    r_c=$(peak_rss_kb "${cmd_c[@]}")

    echo "### $file: $bytes bytes ($(python3 -c "print('%.2f GiB' % ($bytes / 2**30))"), $(python3 -c "import json; print(json.load(open('$manifest'))['lines'])") lines)"
    echo
    python3 - "$bytes" "$t_a" "$t_b" "$t_c" "$r_a" "$r_b" "$r_c" <<'EOF'
import sys
b = int(sys.argv[1])
ta, tb, tc = map(float, sys.argv[2:5])
ra, rb, rc = sys.argv[5:8]
def rss(k):
    try:
        return "%.1f MiB" % (int(k) / 1024)
    except ValueError:
        return k
rows = [
    ('(a) `grep -c "out of memory"`', ta, ra),
    ('(b) `LC_ALL=C grep -c "out of memory"`', tb, rb),
    ("(c) `oomkit explain --format json`", tc, rc),
]
print("| tool | best time | throughput | vs (a) grep | vs (b) LC_ALL=C grep | peak RSS |")
print("|---|---:|---:|---:|---:|---:|")
for name, t, r in rows:
    print(f"| {name} | {t:.3f} s | {b / t / 1e9:.2f} GB/s | {t / ta:.2f}× | {t / tb:.2f}× | {rss(r)} |")
print()
gbs = b / tc / 1e9
print(f"Target (≥ 1 GB/s and ≤ 2× grep): oomkit {gbs:.2f} GB/s "
      f"({'meets' if gbs >= 1 else 'MISSES'} 1 GB/s), "
      f"{tc / ta:.2f}× grep (a) ({'meets' if tc / ta <= 2 else 'MISSES'} 2×), "
      f"{tc / tb:.2f}× grep (b) ({'meets' if tc / tb <= 2 else 'MISSES'} 2×).")
EOF
    echo
    SCALING+=("$size|$bytes|$t_c|$r_c")

    # ---- checks ----
    if ! python3 - "$manifest" "$json" "$rc_c" "$count_a" "$count_b" <<'EOF'
import json, sys
manifest = json.load(open(sys.argv[1]))
rc = int(sys.argv[3])
count_a, count_b = sys.argv[4], sys.argv[5]
ok = True
want = manifest["out_of_memory_lines"]
for name, got in (("(a)", count_a), ("(b)", count_b)):
    if got.strip() != str(want):
        print(f"- FAIL: grep {name} counted {got!r} lines, the generator wrote {want}")
        ok = False
if ok:
    print(f"- ok: both greps count {want} lines containing \"out of memory\" (5 OOM blocks hold "
          f"{sum(e['out_of_memory_lines'] for e in manifest['oom_events'])}, the rest are innocent config lines)")
if rc != 0:
    print(f"- FAIL: oomkit exited {rc} (0 expected: an OOM was found)")
    ok = False
try:
    events = json.load(open(sys.argv[2]))["events"]
except Exception as e:  # noqa: BLE001
    print(f"- FAIL: oomkit's output is not JSON: {e}")
    sys.exit(1)
expected = manifest["oom_events"]
matched = {}
extra = []
for ev in events:
    hit = None
    for i, ex in enumerate(expected):
        if ex["first_line"] <= ev["line"] <= ex["last_line"] and i not in matched:
            hit = i
            break
    if hit is None or not ev["is_oom"] or ev["format"] not in expected[hit]["formats"]:
        extra.append(ev)
    else:
        matched[hit] = ev
for i, ex in enumerate(expected):
    if i in matched:
        ev = matched[i]
        print(f"- ok: {ex['name']}: line {ev['line']} ({ex['first_line']}..{ex['last_line']}), "
              f"format {ev['format']}, cause {ev['cause']}, repeats {ev['repeats']}")
    else:
        print(f"- FAIL: missed {ex['name']} (headline at line {ex['headline_line']}: {ex['headline'][:90]}…)")
        ok = False
for ev in extra:
    print(f"- FAIL: unexpected event: line {ev['line']}, is_oom {ev['is_oom']}, format {ev['format']}, "
          f"message {ev['message'][:100]!r}")
    ok = False
print(f"- oomkit reported {len(events)} event(s), {sum(e['is_oom'] for e in events)} OOM(s); "
      f"expected exactly 5 → {'PASS' if ok else 'FAIL'} (full JSON: {sys.argv[2]})")
sys.exit(0 if ok else 1)
EOF
    then
        status=1
    fi
    echo
done

if [ ${#SCALING[@]} -gt 1 ]; then
    echo "### Scaling: oomkit time and memory by input size"
    echo
    echo "| input | best time | throughput | peak RSS |"
    echo "|---:|---:|---:|---:|"
    for row in "${SCALING[@]}"; do
        IFS='|' read -r size bytes t r <<<"$row"
        python3 -c 'import sys; s,b,t,r=sys.argv[1:]; print(f"| {s} MiB | {float(t):.3f} s | {int(b)/float(t)/1e9:.2f} GB/s | {int(r)/1024:.1f} MiB |")' "$size" "$bytes" "$t" "$r"
    done
    echo
fi
exit $status
