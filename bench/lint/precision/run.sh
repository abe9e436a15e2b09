#!/usr/bin/env bash
# Precision of `oomkit lint`'s default rules on real training and evaluation scripts.
#
#   bash bench/lint/precision/run.sh
#
# Fetches the pinned scripts of files.txt from PyPI (fetch.sh; first use only; nothing
# third-party is kept in this repository: scripts PyPI does not ship are not in the
# sample), lints them from their own tree
# (no pyproject, so no version pins apply), joins every finding with its label in
# labels.tsv (preview findings: preview_labels.tsv) and prints the precision: real / all default findings. A finding without a label (or a
# label without a finding) is reported and fails the run: label it, or fix the rule.
#
# Environment: WORK=/tmp/oomkit-lint-bench, OOMKIT=path (default target/release/oomkit).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../../.."
WORK=${WORK:-/tmp/oomkit-lint-bench}
[[ -d "$WORK/precision" ]] || WORK="$WORK" bash "$here/fetch.sh"
if [[ -z "${OOMKIT:-}" ]]; then
    cargo build --release --locked -q -p oomkit
    OOMKIT=target/release/oomkit
fi
OOMKIT=$(realpath "$OOMKIT")
cd "$WORK/precision"
"$OOMKIT" lint --format json . > "$WORK/precision-default.json" || true
"$OOMKIT" lint --format json --preview --select memory . > "$WORK/precision-preview.json" || true
"$OOMKIT" lint --statistics --select upgrade,advice . > "$WORK/precision-optin.txt" || true
python3 - "$here" "$WORK" <<'PY'
import collections, json, sys
here, work = sys.argv[1], sys.argv[2]
def labels(name):
    out = {}
    for line in open(f"{here}/{name}"):
        if line.startswith("#") or not line.strip():
            continue
        path, ln, code, label, reason = line.rstrip("\n").split("\t")
        out[(path, int(ln), code)] = (label, reason)
    return out
def findings(name, keep=lambda d: True):
    doc = json.load(open(f"{work}/{name}"))
    return [(d["path"], d["line"], d["code"]) for d in doc["diagnostics"] if keep(d)]
import os
files = sum(1 for l in open(f"{here}/files.txt") if l.strip() and not l.startswith("#"))
ok = True
default = findings("precision-default.json")
lab = labels("labels.tsv")
counts = collections.Counter()
for f in default:
    if f not in lab:
        print(f"UNLABELLED {f[0]}:{f[1]} {f[2]}"); ok = False
    else:
        counts[lab[f][0]] += 1
for f in lab:
    if f not in default:
        print(f"STALE LABEL (no such finding) {f[0]}:{f[1]} {f[2]}"); ok = False
n = len(default)
print(f"{files} scripts, {n} default findings: " + ", ".join(f"{counts[k]} {k}" for k in ("real", "debatable", "false")))
if n:
    print(f"precision (real / all): {counts['real']}/{n} = {100 * counts['real'] / n:.0f} %")
by_code = collections.Counter((c, lab.get((p, l, c), ("?",))[0]) for p, l, c in default)
for (code, label), k in sorted(by_code.items()):
    print(f"  {code} {label}: {k}")
default_set = set(default)
preview = [f for f in findings("precision-preview.json") if f not in default_set]
plab = labels("preview_labels.tsv")
pc = collections.Counter(plab.get(f, ("unlabelled",))[0] for f in preview)
print(f"preview rules: {len(preview)} findings: " + ", ".join(f"{v} {k}" for k, v in sorted(pc.items())))
print("opt-in categories (upgrade, advice), not in the default set:")
print(open(f"{work}/precision-optin.txt").read().rstrip() or "  none")
sys.exit(0 if ok else 1)
PY
