#!/usr/bin/env python3
"""The benchmark regression guard: compares the ratios of a quick benchmark
run with the committed reference and fails when one has fallen by more than
half.

    scripts/bench_guard.py check  [RESULTS] [REFERENCE]
    scripts/bench_guard.py update [RESULTS...] [--reference REFERENCE]
    scripts/bench_guard.py selftest

RESULTS defaults to target/bench-results/results.json (what
`scripts/bench.sh --quick` writes), REFERENCE to
crates/weft-bench/ratio-reference.json.

Only ratios are compared -- each one is a weft figure divided by a baseline
measured in the same run on the same box (a bare fdatasync loop, the
store's raw PUT, the peer crate) -- never absolute times, so a slower or
busier machine moves both sides together. A quick run is short and the
machine is shared, so the bound is loose on purpose: a case fails only when
its ratio is worse than half the reference (or, for a latency ratio where
lower is better, more than twice it). That catches a lost batching path or
an extra fsync per append, not a 10% drift.

`update` writes the reference from one or more quick runs, keeping the
lowest ratio each case reached (the worst of a few honest runs, so the
box's noise alone does not fail CI); run it after a deliberate change and
commit the file with the change that moved the figures.
"""

import json
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_RESULTS = ROOT / "target" / "bench-results" / "results.json"
DEFAULT_REFERENCE = ROOT / "crates" / "weft-bench" / "ratio-reference.json"
LATENCY_UNITS = {"ms", "us", "µs", "s", "ns"}
# Ratios that measure the box more than weft, left out of the reference:
# a group-committing writer with many appenders against a one-writer
# fdatasync loop gains more the slower the disk's fsync is, and this
# machine's fsync rate swings tenfold between runs. ("#" is a count of four
# or more digits, see key_of.) The same rows against the peer logs, which
# share syncs too, are kept when their quick runs agree.
UNGUARDED = [
    re.compile(
        r"^dir-append \| .*(\b([2-9]|[1-9][0-9]+)|#) appenders\b.*\| write\+fdatasync loop$"
    )
]
FACTOR = 2.0
# A case whose own quick runs differ by more than this factor cannot tell a
# halving from noise; `update` leaves it out and says so.
NOISE_LIMIT = 1.6


def key_of(row):
    # Counts of four or more digits in a case's name are what the run
    # happened to do (say, "read all 90240 entries"), not which case it is.
    case = re.sub(r"\d{4,}", "#", row["case"])
    # A model baseline names its value ("interval + PUT + CAS = 22.7 ms"),
    # which each run computes afresh.
    baseline = re.sub(r"=\s*[0-9.]+\s*\S*", "= model", row.get("baseline") or "")
    return " | ".join([row["workload"], case, row["subject"], baseline])


def ratios_of(path):
    with open(path, encoding="utf-8") as f:
        report = json.load(f)
    out = {}
    for row in report.get("rows", []):
        ratio = row.get("ratio")
        if ratio is None or not isinstance(ratio, (int, float)):
            continue
        if ratio != ratio or ratio in (float("inf"), float("-inf")):
            continue
        if row["subject"].startswith("opendata"):
            continue  # the peer's own figure: nothing of weft's to guard
        unit = (row.get("unit") or "").split(" ")[0]
        better = "lower" if unit in LATENCY_UNITS else "higher"
        out[key_of(row)] = (float(ratio), better)
    return out


def check(results_path, reference_path):
    if not Path(results_path).exists():
        print(f"bench guard: no results at {results_path}; run scripts/bench.sh --quick first")
        return 2
    if not Path(reference_path).exists():
        print(f"bench guard: no reference at {reference_path}")
        return 2
    with open(reference_path, encoding="utf-8") as f:
        doc = json.load(f)
    reference, unguarded = doc["ratios"], doc.get("unguarded", {})
    measured = ratios_of(results_path)
    failures, missing, checked = [], [], 0
    for key, ref in sorted(reference.items()):
        if key not in measured:
            missing.append(key)
            continue
        ratio, _ = measured[key]
        want, better = ref["ratio"], ref["better"]
        checked += 1
        if better == "higher" and ratio < want / FACTOR:
            failures.append(f"  {key}: ratio {ratio:.3f}, reference {want:.3f} (fell below half)")
        elif better == "lower" and ratio > want * FACTOR:
            failures.append(f"  {key}: ratio {ratio:.3f}, reference {want:.3f} (more than doubled)")
    new = sorted(set(measured) - set(reference))
    print(f"bench guard: {checked} ratios checked against {Path(reference_path).name}")
    for key in new:
        why = unguarded.get(key, "not in the reference")
        print(f"  not checked ({why}): {key}")
    if missing:
        print("bench guard: FAILED: cases in the reference were not measured (a renamed or removed")
        print("case: update the reference with scripts/bench_guard.py update):")
        for key in missing:
            print(f"  {key}")
    if failures:
        print("bench guard: FAILED: these same-run ratios regressed by more than half against")
        print("the committed reference (a real slowdown, or a reference to update deliberately):")
        for line in failures:
            print(line)
    return 1 if failures or missing else 0


def update(result_paths, reference_path):
    runs = [ratios_of(p) for p in result_paths]
    keys = set().union(*runs) if runs else set()
    ratios, unguarded = {}, {}
    for key in sorted(keys):
        if any(p.search(key) for p in UNGUARDED):
            print(f"  left out (measures the box): {key}")
            unguarded[key] = "measures the disk's fsync rate more than weft"
            continue
        values = [r[key][0] for r in runs if key in r]
        better = next(r[key][1] for r in runs if key in r)
        spread = max(values) / min(values) if min(values) > 0 else float("inf")
        if spread > NOISE_LIMIT:
            print(f"  left out (runs differ {spread:.1f}x): {key}")
            unguarded[key] = f"quick runs differ {spread:.1f}x: {sorted(round(v, 3) for v in values)}"
            continue
        worst = min(values) if better == "higher" else max(values)
        ratios[key] = {
            "ratio": round(worst, 4),
            "median": round(statistics.median(values), 4),
            "better": better,
            "runs": len(values),
        }
    doc = {
        "about": "Same-run ratios of quick benchmark runs (scripts/bench.sh --quick): "
        "'ratio' is the worst of the runs, which scripts/bench_guard.py check compares "
        "against (CI fails when a ratio falls below half of it); 'median' is for people.",
        "ratios": ratios,
        "unguarded": unguarded,
    }
    with open(reference_path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2, ensure_ascii=False)
        f.write("\n")
    print(f"bench guard: wrote {len(ratios)} ratios to {reference_path}")
    return 0


def selftest():
    """The guard passes a run equal to its reference and fails a halved
    ratio, a doubled latency ratio and a case that went missing."""
    import contextlib
    import io
    import tempfile

    def report(rows):
        return {"rows": [dict(workload="w", subject="weft", baseline="base", **r) for r in rows]}

    base = [
        {"case": "throughput", "unit": "appends/s", "ratio": 0.9},
        {"case": "latency", "unit": "ms", "ratio": 1.5},
    ]
    cases = {
        "same": (base, 0),
        "slightly worse": ([dict(base[0], ratio=0.5), dict(base[1], ratio=2.9)], 0),
        "throughput halved": ([dict(base[0], ratio=0.4), base[1]], 1),
        "latency doubled": ([base[0], dict(base[1], ratio=3.1)], 1),
        "case missing": ([base[0]], 1),
    }
    with tempfile.TemporaryDirectory() as tmp:
        ref = Path(tmp) / "reference.json"
        first = Path(tmp) / "base.json"
        first.write_text(json.dumps(report(base)))
        quiet = io.StringIO()  # the cases' own verdicts, expected to fail
        with contextlib.redirect_stdout(quiet):
            update([first], ref)
        for name, (rows, want) in cases.items():
            run = Path(tmp) / "run.json"
            run.write_text(json.dumps(report(rows)))
            with contextlib.redirect_stdout(quiet):
                got = check(run, ref)
            if got != want:
                print(f"bench guard selftest: case {name!r}: exit {got}, expected {want}")
                return 1
    # Many appenders against the fsync loop measure the disk; against the
    # peers they are weft's own.
    leave_out = {
        "dir-append | 128 B, 8 appenders | weft dir backend | write+fdatasync loop": True,
        "dir-append | 128 B, # appenders | weft dir backend | write+fdatasync loop": True,
        "dir-append | 128 B, 1 appenders | weft dir backend | write+fdatasync loop": False,
        "dir-append | 128 B, # appenders | weft dir backend | better peer (okaywal 0.3 or fjall 3 as a log)": False,
    }
    for key, want in leave_out.items():
        if any(p.search(key) for p in UNGUARDED) != want:
            print(f"bench guard selftest: {key!r} left out: expected {want}")
            return 1
    print("bench guard selftest: ok")
    return 0


def main(argv):
    if len(argv) < 2 or argv[1] not in ("check", "update", "selftest"):
        print(__doc__)
        return 2
    if argv[1] == "selftest":
        return selftest()
    args = argv[2:]
    if argv[1] == "check":
        results = Path(args[0]) if len(args) > 0 else DEFAULT_RESULTS
        reference = Path(args[1]) if len(args) > 1 else DEFAULT_REFERENCE
        return check(results, reference)
    reference = DEFAULT_REFERENCE
    if "--reference" in args:
        i = args.index("--reference")
        reference = Path(args[i + 1])
        args = args[:i] + args[i + 2 :]
    results = [Path(a) for a in args] or [DEFAULT_RESULTS]
    return update(results, reference)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
