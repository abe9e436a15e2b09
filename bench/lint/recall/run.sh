#!/usr/bin/env bash
# Recall of `oomkit lint` on memory bugs taken from public projects, each with the
# project's own fix. Every case is a directory under cases/ (linted as a tree
# of its own); its files are minimal reproductions written here and cite the repository, the
# file and the issue/PR of the fix in their header. The buggy line ends with `# bug`,
# and `# expect: OOMxxx` names the rule meant to find it.
#
#   bash bench/lint/recall/run.sh              # builds target/release/oomkit first
#   OOMKIT=target/debug/oomkit bash bench/lint/recall/run.sh
#
# A case counts as found when a finding of its expected rule lands on a `# bug` line.
# Two figures: the default rules, and every rule with `--preview`. A case may hold the
# project's fix restated in `fixed/` (linted as a tree of its own): the default rules
# must report nothing there. Recall is also reported by class (the expected rule).
set -euo pipefail
cd "$(dirname "$0")/../../.."
if [[ -z "${OOMKIT:-}" ]]; then
    cargo build --release --locked -q
    OOMKIT=target/release/oomkit
fi
OOMKIT=$(realpath "$OOMKIT")
cd bench/lint/recall/cases
python3 - "$OOMKIT" <<'PY'
import json, os, re, subprocess, sys

oomkit = sys.argv[1]
cases = sorted(d for d in os.listdir(".") if os.path.isdir(d))

def findings(case, args, paths=None):
    out = subprocess.run([oomkit, "lint", *args, "--format", "json", *(paths or ["."])], cwd=case,
                         capture_output=True, text=True)
    if out.returncode not in (0, 1):
        sys.exit(f"{case}: oomkit failed: {out.stderr}")
    return {(os.path.normpath(d["path"]), d["line"], d["code"]) for d in json.loads(out.stdout)["diagnostics"]}

rows, found_default, found_all = [], 0, 0
by_class = {}
fixed_total, fixed_clean = 0, 0
for case in cases:
    bugs, expect = set(), None
    for root, dirs, files in os.walk(case):
        dirs[:] = [d for d in dirs if not (root == case and d == "fixed")]
        for f in files:
            if not f.endswith(".py"):
                continue
            rel = os.path.normpath(os.path.relpath(os.path.join(root, f), case))
            for i, line in enumerate(open(os.path.join(root, f), encoding="utf-8"), 1):
                if re.search(r"#\s*bug\b", line):
                    bugs.add((rel, i))
                m = re.match(r"#\s*expect:\s*(OOM\d+)", line)
                if m:
                    expect = m.group(1)
    paths = sorted(e for e in os.listdir(case) if e != "fixed")
    d = findings(case, [], paths)
    a = findings(case, ["--select", "ALL", "--preview"], paths)
    hit = lambda fs: any((p, l, expect) in fs for p, l in bugs)
    on_bug = sorted({c for p, l, c in a if (p, l) in bugs})
    fd, fa = hit(d), hit(a)
    found_default += fd
    found_all += fa
    k = by_class.setdefault(expect, [0, 0, 0])
    k[0] += 1; k[1] += fd; k[2] += fa
    fixed = "-"
    if os.path.isdir(os.path.join(case, "fixed")):
        fixed_total += 1
        left = findings(os.path.join(case, "fixed"), [])
        fixed = "clean" if not left else "FINDINGS: " + ",".join(sorted({f"{p}:{l} {c}" for p, l, c in left}))
        fixed_clean += not left
    rows.append((case, expect, "yes" if fd else "no", "yes" if fa else "no", ",".join(on_bug) or "-", fixed))

print(f"| case | expected | default rules | all + preview | codes on the bug line | fixed version |")
print(f"|---|---|---|---|---|---|")
for r in rows:
    print("| " + " | ".join(r) + " |")
n = len(rows)
print()
print(f"recall, default rules: {found_default}/{n} = {100 * found_default / n:.0f} %")
print(f"recall, --select ALL --preview: {found_all}/{n} = {100 * found_all / n:.0f} %")
print(f"fixed versions with no default finding: {fixed_clean}/{fixed_total}")
print()
print("| class (rule) | cases | default rules | all + preview |")
print("|---|---:|---:|---:|")
for code, (total, fd, fa) in sorted(by_class.items()):
    print(f"| {code} | {total} | {fd} | {fa} |")
PY
