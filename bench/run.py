#!/usr/bin/env python3
"""warmlint vs its LibCST floor and its peers (Fixit, ruff), on real vLLM trees: bench/README.md.

    .venv/bin/python bench/run.py --repeat 5            # writes bench/results.md

Every measurement is a fresh subprocess; repeats are interleaved (round-robin over all the
measurements) so load on the machine hits every row alike. Wall time: perf_counter around
the child. Peak RSS and CPU time: the child's own rusage from os.wait4(pid) -- exact per
child, unlike getrusage(RUSAGE_CHILDREN), whose ru_maxrss is a high-water mark over every
child so far (a "delta" of it is 0 whenever a smaller child follows a bigger one).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
VENV = REPO / ".venv" / "bin"
PY = str(VENV / "python")
SAMPLER = "vllm/v1/sample/sampler.py"
MARKER = "<!-- analysis: hand-written below this line; bench/run.py keeps it when rewriting -->"


# -- helper modes, run as subprocesses of the benchmark ------------------------------------
def parse_only(kind: str, listfile: str) -> None:
    """The floor: LibCST alone parsing the files (or function spans) warmlint parsed."""
    import libcst as cst

    items = json.loads(Path(listfile).read_text())
    texts = [Path(p).read_text(encoding="utf-8") for p in items] if kind == "files" else items
    started = time.perf_counter()
    for text in texts:
        cst.parse_module(text)
    print(json.dumps({"inner": time.perf_counter() - started, "n": len(texts)}))


def probe(out: str, cli_args: list[str]) -> None:
    """Run the warmlint CLI in-process with timers on its phases (exclusive times, they sum
    to the whole) and record the files it read and the function spans it parsed."""
    import builtins
    import importlib

    spent, stack, kept, spans = Counter(), [], {}, []

    def timed(fn, label, keep=None):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            t0 = time.perf_counter()
            stack.append(0.0)
            try:
                result = fn(*args, **kwargs)
                if keep:
                    kept[keep] = result
                return result
            finally:
                dt = time.perf_counter() - t0
                spent[label] += dt - stack.pop()
                if stack:
                    stack[-1] += dt
        return wrapper

    class CstProxy:  # stands in for `libcst` inside warmlint.cst_functions
        def __init__(self, real):
            self.real, self.parse_module = real, timed(self._parse, "LibCST parse of function spans")

        def _parse(self, text):
            spans.append(text)
            return self.real.parse_module(text)

        def __getattr__(self, name):
            return getattr(self.real, name)

    patches = {  # module -> [(class or None, attribute, label)]
        "warmlint.index": [("SourceTree", "_scan", "tree scan (os.walk)"),
                           ("SourceTree", "toc", "TOC: read + sha1"),
                           (None, "build_toc", "TOC: ast.parse + build")],
        "warmlint.summary_cache": [("SummaryCache", "get_toc", "TOC cache (pickle)"),
                                   ("SummaryCache", "put_toc", "TOC cache (pickle)"),
                                   ("SummaryCache", "get_result", "result cache: sha1 of deps"),
                                   ("SummaryCache", "put_result", "result cache: write")],
        "warmlint.cst_functions": [("ParsedFunction", "position", "LibCST positions (metadata)")],
        "warmlint.interp.core": [("Interp", "code", "LibCST codegen (Interp.code)")],
        "warmlint.analysis": [(None, "analyze", "abstract interpreter (rest)")],
        "warmlint.check": [(None, "analyze_tree", "rules + report", "report"),
                           (None, "_dependencies", "result cache: write")],
    }

    def apply_patches():
        for name in [n for n in patches if n in sys.modules]:
            module = sys.modules[name]
            for owner, attr, label, *keep in patches.pop(name):
                target = getattr(module, owner) if owner else module
                setattr(target, attr, timed(getattr(target, attr), label, *keep))
            if name == "warmlint.cst_functions":
                module.cst = CstProxy(module.cst)

    real_import, real_import_module = builtins.__import__, importlib.import_module
    timed_import = timed(real_import, "imports")
    timed_import_module = timed(real_import_module, "imports")

    def hook_import(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0 and name in sys.modules and not fromlist:
            return real_import(name, globals, locals, fromlist, level)
        result = timed_import(name, globals, locals, fromlist, level)
        apply_patches()
        return result

    def hook_import_module(name, package=None):
        result = timed_import_module(name, package)
        apply_patches()
        return result

    builtins.__import__, importlib.import_module = hook_import, hook_import_module
    started = time.perf_counter()
    cli = importlib.import_module("warmlint.cli")
    main = timed(cli.main, "CLI, config, suppressions, output")
    with open(os.devnull, "w") as sink:
        real_stdout, sys.stdout = sys.stdout, sink
        try:
            main(cli_args)
        finally:
            sys.stdout = real_stdout
    total = time.perf_counter() - started
    report = kept.get("report")
    files = [str(report.root / rel) for rel in report.files] if report is not None else []
    Path(out).write_text(json.dumps({"total": total, "phases": dict(spent), "files": files,
                                     "spans": spans, "libcst_imported": "libcst" in sys.modules}))


# -- measuring ---------------------------------------------------------------------------------
def run_once(cmd: list[str], cwd: Path | None = None) -> dict:
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0), err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{stderr[-2000:]}")
    inner = None
    if stdout.startswith("{"):
        data = json.loads(stdout)
        inner = data.get("inner", data.get("stats", {}).get("seconds"))
    tail = (stdout.strip() or stderr.strip()).splitlines()[-1:] or [""]
    return {"wall": wall, "rss": usage.ru_maxrss / 1024, "cpu": usage.ru_utime + usage.ru_stime,
            "inner": inner, "tail": tail[0][:80]}


def warmlint(tree: Path, cache: Path) -> list[str]:
    return [PY, "-m", "warmlint.cli", "check", "--format", "json", "--cache-dir", str(cache), str(tree)]


def fresh_dir(scratch: Path, prefix: str, like: Path | None = None) -> Path:
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=scratch))
    if like is not None:
        shutil.copytree(like, path, dirs_exist_ok=True)
    return path


def prepare(version: str, releases: Path, scratch: Path) -> dict:
    """Copies of the release outside the repo (Fixit's walker skips gitignored .cache/),
    a touched copy with the cache of its unchanged state, and the probe's file lists."""
    tree, touched = scratch / f"vllm-{version}", scratch / f"vllm-{version}-touched"
    for path in (tree, touched):
        shutil.rmtree(path, ignore_errors=True)
        shutil.copytree(releases / f"vllm-{version}", path)
    warm, snap = scratch / f"cache-{version}-warm", scratch / f"cache-{version}-touched"
    probes = {}
    for mode, target, cache in (("cold", tree, warm), ("warm", tree, warm), ("touched", touched, snap)):
        if mode == "touched":
            run_once(warmlint(touched, snap))  # the cache of the unchanged copy...
            with open(touched / SAMPLER, "a") as fh:  # ...then the edit
                fh.write("# touched by bench/run.py\n")
            snap_copy = fresh_dir(scratch, "probe-", like=snap)
            cache = snap_copy
        out = scratch / f"probe-{version}-{mode}.json"
        run_once([PY, __file__, "--probe", str(out), "--", *warmlint(target, cache)[3:]])
        probes[mode] = json.loads(out.read_text())
    lists = {}
    for kind, items in (("files", probes["cold"]["files"]), ("spans", probes["cold"]["spans"])):
        lists[kind] = scratch / f"{kind}-{version}.json"
        lists[kind].write_text(json.dumps(items))
    return {"tree": tree, "touched": touched, "warm": warm, "snap": snap, "probes": probes, "lists": lists}


def specs(version: str, p: dict, scratch: Path) -> list[tuple[str, callable]]:
    """(row label, () -> command) for every repeated measurement of one tree."""
    return [
        ("python start-up (-c pass)", lambda: [PY, "-c", "pass"]),
        ("python + import libcst", lambda: [PY, "-c", "import libcst"]),
        ("warmlint cold (empty cache)", lambda: warmlint(p["tree"], fresh_dir(scratch, "cold-"))),
        ("warmlint warm (unchanged tree)", lambda: warmlint(p["tree"], p["warm"])),
        ("warmlint touched sampler.py", lambda: warmlint(p["touched"],
                                                          fresh_dir(scratch, "t-", like=p["snap"]))),
        ("floor: LibCST parse of files read", lambda: [PY, __file__, "--parse", "files", str(p["lists"]["files"])]),
        ("floor: LibCST parse of spans parsed", lambda: [PY, __file__, "--parse", "spans", str(p["lists"]["spans"])]),
        ("ruff check --select E9 --no-cache", lambda: [str(VENV / "ruff"), "check", "--select", "E9",
                                                       "--no-cache", str(p["tree"])]),
    ]


def versions() -> dict:
    from importlib.metadata import version

    found = {name: version(name) for name in ("warmlint", "libcst", "fixit")}
    found["ruff"] = subprocess.run([str(VENV / "ruff"), "--version"], capture_output=True,
                                   text=True).stdout.split()[-1]
    found["python"] = subprocess.run([PY, "-c", "import sys; print(sys.version.split()[0])"],
                                     capture_output=True, text=True).stdout.strip()
    return found


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), platform.processor())
    mem = next(int(line.split()[1]) for line in open("/proc/meminfo") if line.startswith("MemTotal"))
    return f"{os.cpu_count()} CPUs (nproc), {cpu}, {mem / 2**20:.1f} GiB RAM, {platform.platform()}"


# -- reporting ---------------------------------------------------------------------------------
def summarize(samples: list[dict]) -> dict:
    walls = [s["wall"] for s in samples]
    inner = [s["inner"] for s in samples if s["inner"] is not None]
    return {"median": statistics.median(walls), "min": min(walls), "max": max(walls), "n": len(walls),
            "inner": statistics.median(inner) if inner else None,
            "cpu": statistics.median(s["cpu"] for s in samples),
            "rss": max(s["rss"] for s in samples), "tail": samples[-1]["tail"]}


def fmt(x, digits=3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def table(results: dict) -> list[str]:
    lines = ["| tree | measurement | n | median s | min s | max s | in-process s | CPU s | peak RSS MB |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for version, rows in results.items():
        for label, r in rows.items():
            lines.append(f"| {version} | {label} | {r['n']} | {fmt(r['median'])} | {fmt(r['min'])} | "
                         f"{fmt(r['max'])} | {fmt(r['inner'])} | {fmt(r['cpu'], 2)} | {r['rss']:.0f} |")
    return lines


def ratios_and_goals(results: dict) -> list[str]:
    lines = ["| tree | ratio | value |", "|---|---|---:|"]
    goals = ["", "| tree | goal | measured | status |", "|---|---|---|---|"]
    for version, r in results.items():
        med = {label: row["median"] for label, row in r.items()}
        cold, warm, touched = (med["warmlint cold (empty cache)"], med["warmlint warm (unchanged tree)"],
                               med["warmlint touched sampler.py"])
        floor, spans = med["floor: LibCST parse of files read"], med["floor: LibCST parse of spans parsed"]
        ruff, fixit = med["ruff check --select E9 --no-cache"], med.get("Fixit 2.2.1, one no-op rule")
        inner_floor = r["floor: LibCST parse of files read"]["inner"]
        rows = [("cold / floor(files read), whole processes", cold / floor),
                ("cold in-process / floor(files read) parse only", r["warmlint cold (empty cache)"]["inner"] / inner_floor),
                ("cold / floor(function spans parsed)", cold / spans),
                ("Fixit / cold", fixit / cold if fixit else None),
                ("warm / ruff E9", warm / ruff), ("touched / cold", touched / cold)]
        lines += [f"| {version} | {name} | {fmt(v, 2)} |" for name, v in rows]
        rss = max(row["rss"] for label, row in r.items() if label.startswith("warmlint"))
        checks = [("cold <= 1.3 x LibCST floor of files read", f"{cold / floor:.2f} x", cold <= 1.3 * floor),
                  (">= 200 x faster than Fixit", f"{fixit / cold:.0f} x" if fixit else "not run",
                   fixit is not None and fixit >= 200 * cold),
                  ("warm <= 0.3 s and faster than ruff E9", f"{warm:.3f} s vs ruff {ruff:.3f} s",
                   warm <= 0.3 and warm < ruff),
                  ("touched sampler.py <= 1 s", f"{touched:.3f} s", touched <= 1.0),
                  ("peak RSS <= 500 MB", f"{rss:.0f} MB", rss <= 500)]
        goals += [f"| {version} | {g} | {m} | {'met' if ok else '**missed**'} |" for g, m, ok in checks]
    return lines + goals


def breakdown(prepared: dict, results: dict) -> list[str]:
    cols = [(v, m) for v in prepared for m in ("cold", "warm", "touched")]
    labels = sorted({k for v, m in cols for k in prepared[v]["probes"][m]["phases"]})
    lines = ["| phase (ms, exclusive) | " + " | ".join(f"{v} {m}" for v, m in cols) + " |",
             "|---|" + "---:|" * len(cols)]
    start = {v: results[v]["python start-up (-c pass)"]["median"] for v in prepared}
    lines.append("| interpreter start-up (python -c pass) | "
                 + " | ".join(f"{start[v] * 1000:.0f}" for v, m in cols) + " |")
    for label in sorted(labels, key=lambda k: -prepared[cols[0][0]]["probes"]["cold"]["phases"].get(k, 0)):
        lines.append(f"| {label} | " + " | ".join(
            f"{prepared[v]['probes'][m]['phases'].get(label, 0) * 1000:.0f}" for v, m in cols) + " |")
    lines.append("| **in-process total** | " + " | ".join(
        f"**{prepared[v]['probes'][m]['total'] * 1000:.0f}**" for v, m in cols) + " |")
    lines.append("| LibCST imported? | " + " | ".join(
        str(prepared[v]["probes"][m]["libcst_imported"]) for v, m in cols) + " |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--versions", default="0.21.0,0.33.0")
    parser.add_argument("--releases", type=Path, help="default: $WARMLINT_CACHE_DIR/releases")
    parser.add_argument("--scratch", type=Path, default=Path(tempfile.gettempdir()) / "warmlint-bench")
    parser.add_argument("--no-fixit", action="store_true", help="skip Fixit (minutes per tree)")
    parser.add_argument("--output", type=Path, default=BENCH / "results.md")
    args = parser.parse_args()
    releases = args.releases or Path(os.environ.get("WARMLINT_CACHE_DIR", REPO / ".cache/warmlint")) / "releases"
    # .pyc files go to the scratch dir: measured runs never compile, the repo gets no __pycache__.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(args.scratch / "pycache")
    args.scratch.mkdir(parents=True, exist_ok=True)
    load_before, started = os.getloadavg(), datetime.now().astimezone()
    vs = args.versions.split(",")
    prepared = {v: prepare(v, releases, args.scratch) for v in vs}  # also primes the .pyc cache
    samples = {v: {label: [] for label, _ in specs(v, prepared[v], args.scratch)} for v in vs}
    for rep in range(args.repeat):
        for v in vs:
            for label, make in specs(v, prepared[v], args.scratch):
                samples[v][label].append(run_once(make()))
        print(f"repeat {rep + 1}/{args.repeat} done", file=sys.stderr, flush=True)
    results = {v: {label: summarize(s) for label, s in rows.items()} for v, rows in samples.items()}
    for v in vs if not args.no_fixit else ():
        print(f"Fixit on {v} (once)...", file=sys.stderr, flush=True)
        cmd = [str(VENV / "fixit"), "--rules", ".noop:NoOp", "lint", str(prepared[v]["tree"])]
        results[v]["Fixit 2.2.1, one no-op rule"] = summarize([run_once(cmd, cwd=BENCH / "fixit_rules")])
    parallel = subprocess.run([PY, str(BENCH / "parallel_experiment.py"), "--repeat", str(args.repeat),
                               *[f"{prepared[v]['tree']}={prepared[v]['lists']['files']}" for v in vs]],
                              capture_output=True, text=True, check=True).stdout
    tails = [f"- {v} {label}: `{r['tail']}`" for v in vs for label, r in results[v].items()
             if label.startswith(("ruff", "Fixit"))]
    ver = versions()
    header = [
        "# warmlint benchmark results", "",
        f"- date: {started:%Y-%m-%d %H:%M %Z} (took {(datetime.now().astimezone() - started).seconds // 60} min)",
        f"- machine: {machine()}",
        f"- load average before/after: {load_before[0]:.2f} / {os.getloadavg()[0]:.2f}",
        "- versions: " + ", ".join(f"{k} {val}" for k, val in ver.items()),
        f"- command: `{Path(sys.executable).relative_to(REPO) if sys.executable.startswith(str(REPO)) else sys.executable}"
        f" bench/{Path(__file__).name} {' '.join(sys.argv[1:])}`",
        f"- trees: copies of {releases}/vllm-VERSION under {args.scratch}; warmlint under test: "
        "`.venv/bin/python -m warmlint.cli check --format json --cache-dir DIR TREE`",
        "- peers' last output line:", *tails, "",
        "## Timings (wall seconds; repeats interleaved; Fixit once per tree)", "", *table(results), "",
        "## Ratios and goals", "", *ratios_and_goals(results), "",
        "## Where warmlint's time goes (one in-process probe per mode, bench/run.py --probe)", "",
        *breakdown(prepared, results), "",
        "## Parallel parsing on this machine (bench/parallel_experiment.py)", "", parallel.rstrip(), "",
    ]
    kept = ""
    if args.output.exists() and MARKER in args.output.read_text():
        kept = args.output.read_text().split(MARKER, 1)[1]
    args.output.write_text("\n".join(header) + "\n" + MARKER + (kept or "\n"))
    print("\n".join(header))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--parse"]:
        parse_only(sys.argv[2], sys.argv[3])
    elif sys.argv[1:2] == ["--probe"]:
        probe(sys.argv[2], sys.argv[4:])
    else:
        main()
