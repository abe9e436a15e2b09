#!/usr/bin/env bash
# Time and peak memory of `oomkit explain` on hostile inputs:
#
#   bash bench/explain/hostile.sh            # writes inputs to bench/data/ once
#
# - dense:   64 MB of TensorFlow BFC warnings and OOM exceptions, every line an error
# - many:    200,000 distinct PyTorch OOMs back to back (36 MB)
# - oneline: one 256 MB line (a minified dump) with an OOM message at its end
# - random:  /dev/urandom (refused as "not a text log", exit 2)
#
# Prints a markdown table: input, size, wall time, peak RSS (GNU time), exit
# status, events. OOMKIT=path benchmarks another binary.
set -euo pipefail
cd "$(dirname "$0")/../.."
DATA=bench/data
mkdir -p "$DATA"
OOMKIT=${OOMKIT:-target/release/oomkit}
[ -x "$OOMKIT" ] || cargo build --release --locked -q
command -v python3 >/dev/null || { echo "hostile.sh: python3 is required" >&2; exit 2; }

[ -f "$DATA/dense_64m.log" ] || python3 - "$DATA/dense_64m.log" <<'PY'
import sys
warn = ("2024-01-01 12:00:00.000000: W tensorflow/core/common_runtime/bfc_allocator.cc:290] "
        "Allocator (GPU_0_bfc) ran out of memory trying to allocate 2.00GiB with freed_by_count=0. "
        "The caller indicates that this is not a failure, but this may mean that there could be "
        "performance gains if more memory were available.\n")
err = ("tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor "
       "with shape[128,128,109,109] and type float on /job:localhost/replica:0/task:0/device:GPU:0 "
       "by allocator GPU_0_bfc\n")
block = (warn + err) * 1000
with open(sys.argv[1], "w") as f:
    while f.tell() < 64_000_000:
        f.write(block)
PY
[ -f "$DATA/many_ooms_200000.log" ] || python3 bench/explain/gen_many_ooms.py --count 200000 --out "$DATA/many_ooms_200000.log"
[ -f "$DATA/oneline_256m.log" ] || python3 - "$DATA/oneline_256m.log" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    f.write("epoch 1\n")
    chunk = '{"step": 1, "loss": 0.5, "tokens": [1, 2, 3, 4]}, ' * 20000
    while f.tell() < 256_000_000:
        f.write(chunk)
    f.write(" torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
            "total capacity of 23.65 GiB of which 1.27 GiB is free.\n")
PY

echo "| input | size | time | peak RSS | exit | events |"
echo "|---|---:|---:|---:|---:|---:|"
for input in "$DATA/dense_64m.log" "$DATA/many_ooms_200000.log" "$DATA/oneline_256m.log" /dev/urandom; do
  size=$( [ -f "$input" ] && du -h --apparent-size "$input" | cut -f1 || echo "endless")
  set +e
  /usr/bin/time -f "%e %M" -o /tmp/oomkit_time.$$ "$OOMKIT" explain --format json "$input" > /tmp/oomkit_out.$$ 2>/dev/null
  code=$?
  set -e
  read -r secs kb < <(tail -n 1 /tmp/oomkit_time.$$)
  events=$(python3 -c 'import json,sys
try: print(len(json.load(open(sys.argv[1]))["events"]))
except Exception: print("-")' /tmp/oomkit_out.$$)
  echo "| $(basename "$input") | $size | ${secs} s | $((kb / 1024)) MiB | $code | $events |"
done
rm -f /tmp/oomkit_time.$$ /tmp/oomkit_out.$$
