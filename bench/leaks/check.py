"""Runs `oomkit leaks --format json` on every gallery script and checks the report
against the expectation written in the script, then measures the overhead of
`oomkit leaks` against the plain run. Standard library only; run.sh calls it.

Expectations: a leak script marks its holder line with a trailing comment
`# leaks: expect KIND`; a clean script carries `# leaks: clean` at the top.
A leak script passes when oomkit exits 1 and every reported leak is in that script,
at that line, of that kind (at least one). A clean script passes when oomkit exits 0
and reports no leak.
"""
import argparse
import json
import os
import re
import resource
import shlex
import subprocess
import sys
import time

EXPECT = re.compile(r"#\s*leaks:\s*expect\s+(\w+)")
CLEAN = re.compile(r"^#\s*leaks:\s*clean\b")
KINDS = {"graph", "tensors", "create_graph", "params", "host"}


def expectation(path):
    """(kind, line) for a leak script, ("clean", None) for a clean one."""
    marks = []
    clean = False
    with open(path, encoding="utf-8") as f:
        for n, text in enumerate(f, 1):
            if CLEAN.match(text.strip()):
                clean = True
            m = EXPECT.search(text)
            if m:
                marks.append((m.group(1), n))
    if clean and not marks:
        return "clean", None
    if len(marks) == 1 and not clean and marks[0][0] in KINDS:
        return marks[0]
    raise SystemExit(f"{path}: needs exactly one '# leaks: expect KIND' (KIND in {sorted(KINDS)}) or '# leaks: clean'")


def run(cmd, timeout, cwd, env=None):
    """Runs cmd; returns (rc, stdout, stderr, wall seconds, child CPU seconds)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    try:
        p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc = "timeout"
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return rc, out, err, wall, cpu


def same_file(reported, script, cwd):
    if not isinstance(reported, str) or not reported:
        return False
    full = reported if os.path.isabs(reported) else os.path.join(cwd, reported)
    return os.path.realpath(full) == os.path.realpath(script)


def describe(leak, script, cwd):
    kind = leak.get("kind")
    line = leak.get("line")
    where = f"{line}" if same_file(leak.get("file"), script, cwd) else f"{leak.get('file')}:{line}"
    return f"{kind}@{where}"


def judge(script, kind, line, rc, out, cwd):
    """(got, ok, why): got is a short description of the report."""
    try:
        report = json.loads(out)
        leaks = report["leaks"]
        assert isinstance(leaks, list)
    except (ValueError, KeyError, TypeError, AssertionError):
        return f"no JSON report (exit {rc})", False, "stdout is not a JSON object with a `leaks` array"
    got = ", ".join(describe(l, script, cwd) for l in leaks) or "none"
    if rc not in (0, 1):
        got += f" (exit {rc})"
    if kind == "clean":
        if leaks:
            return got, False, "clean script reported as leaking"
        if rc != 0:
            return got, False, f"exit {rc}, expected 0"
        return got, True, ""
    problems = []
    if not leaks:
        problems.append("no leak reported")
    for l in leaks:
        wrong = []
        if not same_file(l.get("file"), script, cwd):
            wrong.append(f"file {l.get('file')!r}")
        if l.get("line") != line:
            wrong.append(f"line {l.get('line')} (expected {line})")
        if l.get("kind") != kind:
            wrong.append(f"kind {l.get('kind')} (expected {kind})")
        if wrong:
            problems.append(f"{describe(l, script, cwd)}: " + ", ".join(wrong))
    if rc != 1:
        problems.append(f"exit {rc}, expected 1")
    return got, not problems, "; ".join(problems)


def excerpt(text, limit=1500):
    text = text.strip()
    return text if len(text) <= limit else "..." + text[-limit:]


def gallery_table(args, cwd):
    scripts = sorted(
        os.path.join(args.gallery, f)
        for f in os.listdir(args.gallery)
        if f.endswith(".py") and (not args.only or any(o in f for o in args.only))
        # tf_*.py are the TensorFlow/Keras scripts; the others need torch.
        and f.startswith("tf_") == (args.framework == "tensorflow")
    )
    rows, details, records = [], [], []
    for script in scripts:
        kind, line = expectation(script)
        cmd = [args.oomkit, "leaks", "--format", "json", *args.leaks_args, "--", args.python, script]
        rc, out, err, wall, _ = run(cmd, args.timeout, cwd)
        got, ok, why = judge(script, kind, line, rc, out, cwd)
        name = os.path.basename(script)
        expected = "clean" if kind == "clean" else f"{kind}@{line}"
        rows.append((name, expected, got, "ok" if ok else "FAIL"))
        records.append({"script": name, "expected": expected, "got": got, "ok": ok, "why": why,
                        "exit": rc, "seconds": round(wall, 1), "stdout": out, "stderr": err})
        print(f"  {name}: {'ok' if ok else 'FAIL ' + why} ({wall:.1f} s)", file=sys.stderr, flush=True)
        if not ok:
            details.append(f"### {name}\nexpected {expected}, got {got}: {why}\n"
                           f"exit {rc}\nstdout:\n```\n{excerpt(out)}\n```\nstderr:\n```\n{excerpt(err)}\n```\n")
    return rows, details, records


def overhead(args, cwd):
    """Best-of-N interleaved walls (and CPU) of: import torch, the plain program, oomkit leaks."""
    prog = os.path.join(os.path.dirname(os.path.abspath(__file__)), "overhead_model.py")
    steps = str(args.overhead_steps)
    cmds = {
        "import torch": [args.python, "-c", "import torch"],
        "plain": [args.python, prog, steps],
        "oomkit leaks": [args.oomkit, "leaks", "--steps", steps, "--format", "json", "--", args.python, prog, steps],
    }
    best = {k: (float("inf"), float("inf")) for k in cmds}
    loop = {}
    leaks_exit = None
    report = {}
    times_file = os.path.join(cwd, "bench", "data", "leaks-overhead-times.txt")
    for _ in range(args.runs):
        for name, cmd in cmds.items():
            if os.path.exists(times_file):
                os.remove(times_file)
            env = dict(os.environ, OVERHEAD_TIMES=times_file)
            rc, out, err, wall, cpu = run(cmd, args.timeout, cwd, env)
            if name != "import torch":
                try:
                    with open(times_file, encoding="utf-8") as f:
                        stamps = [tuple(float(t) for t in line.split()) for line in f if line.strip()]
                    if len(stamps) >= 2:
                        span = (stamps[-1][0] - stamps[0][0], stamps[-1][1] - stamps[0][1])
                        old = loop.get(name, (float("inf"), float("inf")))
                        loop[name] = (min(old[0], span[0]), min(old[1], span[1]))
                except OSError:
                    pass
            if name == "oomkit leaks":
                leaks_exit = rc
                try:
                    report = json.loads(out)
                except ValueError:
                    report = {}
                if rc != 0:
                    print(f"overhead: oomkit leaks exited {rc}: {excerpt(err, 600)}", file=sys.stderr)
            elif rc != 0:
                raise SystemExit(f"overhead: `{' '.join(cmd)}` exited {rc}: {excerpt(err, 600)}")
            best[name] = (min(best[name][0], wall), min(best[name][1], cpu))
    return best, leaks_exit, report, loop


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--oomkit", required=True)
    ap.add_argument("--python", required=True, help="the Python that has torch")
    ap.add_argument("--gallery", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "gallery"))
    ap.add_argument("--only", nargs="*", default=[], help="run only scripts whose name contains one of these")
    ap.add_argument("--leaks-args", type=shlex.split, default=[], help="extra arguments for `oomkit leaks`, one string")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--runs", type=int, default=3, help="overhead: interleaved rounds, best of N")
    ap.add_argument("--overhead-steps", type=int, default=10)
    ap.add_argument("--budget", type=float, default=3.0, help="overhead: the most `leaks`/plain wall ratio")
    ap.add_argument("--no-overhead", action="store_true")
    ap.add_argument("--framework", choices=["torch", "tensorflow"], default="torch",
                    help="what the venv has: tf_*.py scripts run only with tensorflow, the others only with torch")
    ap.add_argument("--json-out", help="write every run's record (with stdout/stderr) here")
    args = ap.parse_args()
    cwd = os.getcwd()

    rows, details, records = gallery_table(args, cwd)
    failed = sum(1 for r in rows if r[3] != "ok")
    print("| script | expected | got | ok |")
    print("|---|---|---|---|")
    for r in rows:
        print("| `{}` | {} | {} | {} |".format(*r))
    print(f"\n{len(rows) - failed}/{len(rows)} scripts as expected.")

    over_fail = False
    result = {"gallery": records}
    if not args.no_overhead and args.framework == "torch":
        best, leaks_exit, report, loop = overhead(args, cwd)
        plain, leaks, imp = best["plain"], best["oomkit leaks"], best["import torch"]
        ratio, cpu_ratio = leaks[0] / plain[0], leaks[1] / plain[1]
        print(f"\nOverhead ({args.overhead_steps} steps of overhead_model.py, best of {args.runs} interleaved; "
              f"oomkit counted {report.get('steps')} steps on the {report.get('clock')} clock, "
              f"completed: {report.get('completed')}):\n")
        print("| command | wall | CPU (user+sys) |")
        print("|---|---:|---:|")
        for name in ("import torch", "plain", "oomkit leaks"):
            print(f"| {name} | {best[name][0]:.2f} s | {best[name][1]:.2f} s |")
        if "plain" in loop and "oomkit leaks" in loop:
            print(f"\nThe training loop alone (start of step 1 to start of step {args.overhead_steps}, "
                  f"best of {args.runs}): plain {loop['plain'][0]:.2f} s wall, {loop['plain'][1]:.2f} s CPU; "
                  f"under oomkit leaks {loop['oomkit leaks'][0]:.2f} s wall, {loop['oomkit leaks'][1]:.2f} s CPU: "
                  f"{loop['oomkit leaks'][0] / loop['plain'][0]:.2f}x wall, "
                  f"{loop['oomkit leaks'][1] / loop['plain'][1]:.2f}x CPU")
            result_loop = {k: v for k, v in loop.items()}
        else:
            result_loop = None
        over_fail = ratio >= args.budget or leaks_exit != 0
        print(f"\n`oomkit leaks` / plain: {ratio:.2f}x wall, {cpu_ratio:.2f}x CPU "
              f"(budget < {args.budget:g}x wall): {'FAIL' if over_fail else 'ok'}"
              + (f"; oomkit leaks exited {leaks_exit} on the clean program" if leaks_exit != 0 else ""))
        result["overhead"] = {"wall": {k: v[0] for k, v in best.items()},
                              "cpu": {k: v[1] for k, v in best.items()},
                              "ratio_wall": ratio, "ratio_cpu": cpu_ratio, "leaks_exit": leaks_exit,
                              "loop": result_loop}
    if details:
        print("\n## Mismatches\n")
        print("\n".join(details))
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)
    sys.exit(1 if failed or over_fail else 0)


if __name__ == "__main__":
    main()
