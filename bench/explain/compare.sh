#!/usr/bin/env bash
# Wall-time ratios of oomkit binaries to `grep -c "out of memory"` on one log,
# measured within one run: grep and each binary interleaved, N rounds, best of N.
# Every command's stdout goes to a scratch file (never /dev/null: GNU grep then
# stops at the first match).
#
#   bash bench/explain/compare.sh FILE N BINARY...
#   bash bench/explain/compare.sh bench/data/train_256m_tqdm.log 21 ./before ./target/release/oomkit
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 FILE N BINARY..." >&2; exit 2; }
file=$1; n=$2; shift 2
scratch=$(mktemp -d); trap 'rm -rf "$scratch"' EXIT
cat "$file" > "$scratch/warm"    # page cache
declare -A best
secs() { local s=$EPOCHREALTIME; "$@" > "$scratch/out" 2>&1 || true; awk -v s="$s" -v e="$EPOCHREALTIME" 'BEGIN{printf "%.4f", e-s}'; }
for _ in $(seq "$n"); do
    for k in grep "$@"; do
        if [ "$k" = grep ]; then d=$(secs grep -c "out of memory" "$file"); else d=$(secs "$k" explain --format json "$file"); fi
        best[$k]=$(awk -v a="$d" -v b="${best[$k]:-1e9}" 'BEGIN{print (a<b)?a:b}')
    done
done
for k in grep "$@"; do
    awk -v k="$k" -v a="${best[$k]}" -v g="${best[grep]}" 'BEGIN{printf "%-40s %.3f s  %.2fx\n", k, a, a/g}'
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
