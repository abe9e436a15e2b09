#!/usr/bin/env python3
"""Score `oomkit explain --format json` on the held-out field set (cases.json).

Each case is a real message pasted in a public issue (source URL and date in the
case) with the fields a careful reader is certain of from the text. Only the
labelled fields are compared; a field left out of a case is not scored.

    python3 bench/explain-field/score.py [--oomkit PATH] [--json OUT] [--quiet]

Prints per-field and overall accuracy and every miss. Standard library only.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

BYTE_FIELDS = ("requested_bytes", "free_bytes", "total_bytes", "allocated_bytes", "reserved_bytes")
FIELDS = ("events", "is_oom", "framework", "backend", "device") + BYTE_FIELDS + ("cause", "phase")

UNITS = {
    "": 1, "B": 1, "BYTES": 1,
    "K": 1 << 10, "KB": 1 << 10, "KIB": 1 << 10,
    "M": 1 << 20, "MB": 1 << 20, "MIB": 1 << 20,
    "G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30,
    "T": 1 << 40, "TB": 1 << 40, "TIB": 1 << 40,
}
SIZE = re.compile(r"^\s*([0-9][0-9,]*)(?:\.([0-9]+))?\s*([A-Za-z]*)\s*$")


def parse_size(text):
    """A printed size (binary units, as the frameworks mean them) -> (bytes, tolerance)."""
    m = SIZE.match(text)
    if not m:
        raise ValueError(f"unreadable size {text!r}")
    whole, frac, unit = m.group(1).replace(",", ""), m.group(2) or "", m.group(3).upper()
    mult = UNITS[unit]
    value = (int(whole) + (int(frac) / 10 ** len(frac) if frac else 0.0)) * mult
    # Half of the last printed digit: the size as printed cannot say more.
    tol = 0.5 * mult / (10 ** len(frac)) if mult > 1 else 0
    return value, tol


def expected_bytes(value):
    """An expected byte field: int, printed string, or a list of parts to add."""
    if value is None:
        return None
    if isinstance(value, int):
        return (value, 0)
    if isinstance(value, str):
        return parse_size(value)
    total, tol = 0.0, 0.0
    for part in value:
        v, t = expected_bytes(part)
        total += v
        tol += t
    return (total, tol)


def run_explain(oomkit, text):
    with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False, encoding="utf-8") as f:
        f.write(text)
        path = f.name
    try:
        proc = subprocess.run(
            [oomkit, "explain", "--format", "json", path],
            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        )
    finally:
        os.unlink(path)
    try:
        return json.loads(proc.stdout).get("events", []), proc.returncode
    except json.JSONDecodeError:
        return None, proc.returncode


def pick_event(events, expect):
    """The event the labels describe: the first OOM, else the first event."""
    if not events:
        return None
    if expect.get("is_oom", True):
        for e in events:
            if e.get("is_oom"):
                return e
    return events[0]


def compare(field, want, events, event):
    """(ok, got) for one labelled field."""
    if field == "events":
        return len(events) == want, len(events)
    if event is None:
        # No event at all: right only for a look-alike.
        if field == "is_oom":
            return want is False, None
        if field == "cause":
            return want in ("not_oom", "unknown"), None
        return want is None, None
    got = event.get(field)
    if field in BYTE_FIELDS:
        exp = expected_bytes(want)
        if exp is None or got is None:
            return exp is None and got is None, got
        value, tol = exp
        return abs(got - value) <= tol + 1, got
    return got == want, got


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--oomkit", default=os.environ.get("OOMKIT", os.path.join(ROOT, "target", "release", "oomkit")))
    ap.add_argument("--cases", default=os.path.join(HERE, "cases.json"))
    ap.add_argument("--json", help="write per-case results here")
    ap.add_argument("--quiet", action="store_true", help="only the totals")
    args = ap.parse_args()
    if not os.path.exists(args.oomkit):
        alt = os.path.join(ROOT, "target", "debug", "oomkit")
        if os.path.exists(alt):
            args.oomkit = alt
        else:
            sys.exit(f"no oomkit binary at {args.oomkit} (build it, or pass --oomkit)")

    cases = json.load(open(args.cases, encoding="utf-8"))["cases"]
    per_field = {f: [0, 0] for f in FIELDS}
    misses, results = [], []
    for case in cases:
        expect = case["expect"]
        events, rc = run_explain(args.oomkit, case["text"])
        if events is None:
            events = []
            misses.append((case["id"], "output", "JSON", f"unreadable output (exit {rc})"))
        event = pick_event(events, expect)
        row = {"id": case["id"], "fields": {}}
        for field in FIELDS:
            if field not in expect:
                continue
            ok, got = compare(field, expect[field], events, event)
            per_field[field][1] += 1
            per_field[field][0] += ok
            row["fields"][field] = {"want": expect[field], "got": got, "ok": ok}
            if not ok:
                misses.append((case["id"], field, expect[field], got))
        results.append(row)

    right = sum(v[0] for v in per_field.values())
    total = sum(v[1] for v in per_field.values())
    whole = sum(all(f["ok"] for f in r["fields"].values()) for r in results)
    print(f"cases: {len(cases)} ({sum(1 for c in cases if c['expect'].get('is_oom') is False or c['expect'].get('events') == 0)} look-alikes)")
    print(f"{'field':<16} {'right':>5} / {'labelled':<8} accuracy")
    for field in FIELDS:
        r, n = per_field[field]
        if n:
            print(f"{field:<16} {r:>5} / {n:<8} {100.0 * r / n:5.1f} %")
    print(f"{'overall':<16} {right:>5} / {total:<8} {100.0 * right / total:5.1f} %")
    print(f"cases with every labelled field right: {whole} / {len(cases)}")
    if not args.quiet and misses:
        print("\nmisses:")
        for cid, field, want, got in misses:
            print(f"  {cid:<40} {field:<16} want {json.dumps(want)}  got {json.dumps(got)}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"overall": [right, total], "fields": per_field, "cases": results}, f, indent=1)


if __name__ == "__main__":
    main()
