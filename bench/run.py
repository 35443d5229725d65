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

import scaling  # bench/scaling.py, bench/workloads.py: this script's directory is first on sys.path
import workloads

ME = str(Path(__file__).resolve())
BENCH = Path(ME).parent
REPO = BENCH.parent
VENV = REPO / ".venv" / "bin"
PY = str(VENV / "python")
COLD, WARM = "warmlint cold (empty cache)", "warmlint warm (unchanged tree)"
# The cold run on one core (forked leaves, one at a time: shared prefixes only) and
# serially (no forking, what warmlint did before `--jobs`); COLD uses every core.
COLD_1, COLD_0 = "warmlint cold, --jobs 1", "warmlint cold, --jobs 0 (serial)"
TOUCHED = "warmlint touched sampler.py (comment appended)"
MOVED = "warmlint moved sampler.py (comment line added on top)"
EDITED = "warmlint edited sampler.py (statement appended)"
EDITED_READ = "warmlint edited sampler.py's sample() (statement in its body)"
# label -> (copy suffix, edit of sampler.py's text): after a run that filled the cache
EDITS = {
    TOUCHED: ("touched", lambda text: text + "# touched by bench/run.py\n"),  # moves nothing
    MOVED: ("moved", lambda text: "# moved by bench/run.py\n" + text),  # moves every line
    EDITED: ("edited", lambda text: text + "_EDITED_BY_BENCH = 1\n"),  # new code nothing reads
    EDITED_READ: ("edited-read", lambda text: _in_body(text, "sample")),  # code the run reads
}
FILES, SPANS = "floor: LibCST parse of files read", "floor: LibCST parse of spans parsed"
RUFF, FIXIT = "ruff check --select E9 --no-cache", "Fixit 2.2.1, one no-op rule"
MARKER = "<!-- analysis: hand-written below this line; bench/run.py keeps it when rewriting -->"


def _in_body(text: str, name: str) -> str:
    """``text`` with a statement first in the body of the function ``name``."""
    import ast
    import re

    func = next(n for n in ast.walk(ast.parse(text))
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name)
    lines = text.splitlines(keepends=True)
    at = func.body[0].lineno - 1
    indent = re.match(r"\s*", lines[at]).group(0)
    return "".join(lines[:at]) + f"{indent}_edited_by_bench = 1\n" + "".join(lines[at:])


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
    """Run the warmlint CLI in-process with timers on its phases (exclusive times: they sum
    to the whole) and record the files it read and the function spans it parsed."""
    import builtins
    import importlib

    spent, stack, seen = Counter(), [], {"spans": [], "report": None}

    def timed(fn, label, record=None):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            t0 = time.perf_counter()
            stack.append(0.0)
            try:
                result = fn(*args, **kwargs)
                if record == "spans":
                    seen["spans"].append(args[0])
                elif record:
                    seen[record] = result
                return result
            finally:
                dt = time.perf_counter() - t0
                spent[label] += dt - stack.pop()
                if stack:
                    stack[-1] += dt
        return wrapper

    patches = {  # module -> [(class or None, attribute, label[, what to record])]
        "libcst": [(None, "parse_module", "LibCST parse of function spans", "spans"),
                   (None, "parse_expression", "LibCST parse_expression (TOC values)")],
        "warmlint.index": [("SourceTree", "_scan", "tree scan (os.walk)"), ("SourceTree", "toc", "TOC: read + sha1"),
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

    def apply_patches():  # once each module is fully initialized
        for name in [n for n in patches if n in sys.modules
                     and not getattr(sys.modules[n].__spec__, "_initializing", False)]:
            for owner, attr, *how in patches.pop(name):  # names the engine no longer has: skipped
                target = getattr(sys.modules[name], owner, None) if owner else sys.modules[name]
                if hasattr(target, attr):
                    setattr(target, attr, timed(getattr(target, attr), *how))

    def hooked(real):  # time imports that load something; patch what they loaded
        slow = timed(real, "imports")

        def hook(name, *args, **kwargs):
            loaded, fromlist = sys.modules.get(name), (args[2] if len(args) > 2 else kwargs.get("fromlist")) or ()
            if loaded and not (args[3:4] or [kwargs.get("level")])[0] and all(hasattr(loaded, f) for f in fromlist):
                return real(name, *args, **kwargs)
            result = slow(name, *args, **kwargs)
            apply_patches()
            return result
        return hook

    builtins.__import__, importlib.import_module = hooked(builtins.__import__), hooked(importlib.import_module)
    started = time.perf_counter()
    main = timed(importlib.import_module("warmlint.cli").main, "CLI, config, suppressions, output")
    with open(os.devnull, "w") as sink:
        real_stdout, sys.stdout = sys.stdout, sink
        try:
            rc = main(cli_args)
        finally:
            sys.stdout = real_stdout
    report, total = seen["report"], time.perf_counter() - started
    files = [str(report.root / rel) for rel in report.files] if report is not None else []
    Path(out).write_text(json.dumps({"total": total, "phases": dict(spent), "files": files, "spans": seen["spans"],
                                     "stats": report.stats if report is not None else {},
                                     "libcst_imported": "libcst" in sys.modules}))
    sys.exit(rc)


# -- measuring ---------------------------------------------------------------------------------
def run_once(cmd: list[str], cwd: Path | None = None, ok: tuple | None = (0, 1)) -> dict:
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0), err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if ok is not None and proc.returncode not in ok:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{stderr[-2000:]}")
    inner = None
    if stdout.startswith("{"):
        data = json.loads(stdout)
        inner = data.get("inner", data.get("stats", {}).get("seconds"))
    tail = ((stdout.strip() or stderr.strip()).splitlines() or [""])[-1][:80]
    return {"wall": wall, "rss": usage.ru_maxrss / 1024, "cpu": usage.ru_utime + usage.ru_stime,
            "inner": inner, "tail": f"{tail} (exit {proc.returncode})"}


def warmlint(tree: Path, cache: Path, extra: tuple = ()) -> list[str]:
    return [PY, "-m", "warmlint.cli", "check", "--format", "json", "--cache-dir", str(cache), *extra, str(tree)]


def fresh_dir(scratch: Path, prefix: str, like: Path | None = None) -> Path:
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=scratch))
    if like is not None:
        shutil.copytree(like, path, dirs_exist_ok=True)
    return path


def prepare(version: str, releases: Path, scratch: Path) -> dict:
    """Copies of the release outside the repo (Fixit's walker skips the gitignored .cache/),
    a touched copy with the cache of its unchanged state, a probe of each mode, file lists."""
    name, extra = workloads.tree_name(version), workloads.extra_args(version)
    edited = workloads.sampler(version, releases / name)
    tree, warm = scratch / name, scratch / f"cache-{name}-warm"
    copies = {label: (scratch / f"{name}-{suffix}", scratch / f"cache-{name}-{suffix}")
              for label, (suffix, _) in EDITS.items()}
    for path in (tree, warm, *(p for pair in copies.values() for p in pair)):
        shutil.rmtree(path, ignore_errors=True)
    for path in (tree, *(copy for copy, _ in copies.values())):
        shutil.copytree(releases / name, path)

    def probed(mode: str, target: Path, cache: Path) -> dict:
        out = scratch / f"probe-{name}-{mode}.json"
        run_once([PY, ME, "--probe", str(out), "--", *warmlint(target, cache, extra)[3:]])
        return json.loads(out.read_text())

    run_once(warmlint(tree, fresh_dir(scratch, "cold-"), extra))  # untimed: compiles .pyc, fills the page cache
    probes = {"cold": probed("cold", tree, warm), "warm": probed("warm", tree, warm)}
    for label, (copy, snap) in copies.items():
        run_once(warmlint(copy, snap, extra))  # the cache of the unchanged copy, then the edit
        (copy / edited).write_text(EDITS[label][1]((copy / edited).read_text()))
    touched, snap = copies[TOUCHED]
    probes["touched"] = probed("touched", touched, fresh_dir(scratch, "probe-", like=snap))
    lists = {kind: scratch / f"{kind}-{name}.json" for kind in ("files", "spans")}
    for kind, path in lists.items():
        path.write_text(json.dumps(probes["cold"][kind]))
    return {"tree": tree, "warm": warm, "copies": copies, "probes": probes, "lists": lists, "extra": extra}


def _edited_run(copy_and_snap: tuple, scratch: Path, extra: list) -> list:
    copy, snap = copy_and_snap
    return warmlint(copy, fresh_dir(scratch, "edit-", like=snap), extra)


def _cold_jobs(p: dict, scratch: Path, n: int) -> list:
    return warmlint(p["tree"], fresh_dir(scratch, "cold-"), (*p["extra"], "-j", str(n)))


def specs(p: dict, scratch: Path, jobs: tuple = ()) -> list[tuple[str, callable]]:
    """(row label, () -> command) for every repeated measurement of one tree."""
    return [
        ("python start-up (-c pass)", lambda: [PY, "-c", "pass"]),
        ("python + import libcst", lambda: [PY, "-c", "import libcst"]),
        (COLD, lambda: warmlint(p["tree"], fresh_dir(scratch, "cold-"), p["extra"])),
        (COLD_1, lambda: warmlint(p["tree"], fresh_dir(scratch, "cold-"), (*p["extra"], "-j", "1"))),
        (COLD_0, lambda: warmlint(p["tree"], fresh_dir(scratch, "cold-"), (*p["extra"], "-j", "0"))),
        *((scaling.label(n), functools.partial(_cold_jobs, p, scratch, n)) for n in jobs),
        (WARM, lambda: warmlint(p["tree"], p["warm"], p["extra"])),
        *((label, functools.partial(_edited_run, p["copies"][label], scratch, p["extra"])) for label in EDITS),
        (FILES, lambda: [PY, ME, "--parse", "files", str(p["lists"]["files"])]),
        (SPANS, lambda: [PY, ME, "--parse", "spans", str(p["lists"]["spans"])]),
        (RUFF, lambda: [str(VENV / "ruff"), "check", "--select", "E9", "--no-cache", str(p["tree"])]),
    ]


def versions() -> dict:  # run.py runs under the venv's python (see README)
    from importlib.metadata import PackageNotFoundError, version

    def installed(name: str) -> str:  # Fixit is optional (--no-fixit)
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    ruff = subprocess.run([str(VENV / "ruff"), "--version"], capture_output=True, text=True).stdout.split()[-1]
    found = {n: installed(n) for n in ("warmlint", "libcst", "fixit")}
    return found | {"ruff": ruff, "python": platform.python_version()}


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True).stdout.strip()


def use_source(ref: str | None, scratch: Path) -> str:
    """Point PYTHONPATH at an export of git revision ``ref`` (None: the working tree)."""
    if not ref:
        return f"working tree of {REPO} (git describe: {git('describe', '--always', '--dirty')})"
    commit = git("rev-parse", ref)
    src = scratch / f"src-{commit[:12]}"
    if not src.exists():
        src.mkdir()
        subprocess.run(f"git -C {REPO} archive {commit} | tar -x -C {src}", shell=True, check=True)
        (src / "warmlint" / "rules").symlink_to("../rules")  # pyproject's package-dir mapping
    os.environ["PYTHONPATH"] = str(src)
    return f"commit {commit} (`--ref {ref}`), exported to {src}"


def _cores(meta: dict) -> int:
    """The measuring machine's core count, from its description (``nproc N, ...``)."""
    return int(meta["machine"].split(",")[0].split()[-1])


def machine() -> str:
    cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if "model name" in line)
    mem = next(int(line.split()[1]) for line in open("/proc/meminfo") if line.startswith("MemTotal"))
    return f"nproc {os.cpu_count()}, {cpu}, {mem / 2**20:.1f} GiB RAM, {platform.platform()}"


# -- reporting ---------------------------------------------------------------------------------
def md(*cells) -> str:
    return "| " + " | ".join(map(str, cells)) + " |"


def fmt(x, digits=3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def summarize(samples: list[dict]) -> dict:
    walls, inner = [s["wall"] for s in samples], [s["inner"] for s in samples if s["inner"] is not None]
    return {"median": statistics.median(walls), "min": min(walls), "max": max(walls), "n": len(walls),
            "inner": statistics.median(inner) if inner else None, "rss": max(s["rss"] for s in samples),
            "cpu": statistics.median(s["cpu"] for s in samples), "tail": samples[-1]["tail"]}


def table(results: dict) -> list[str]:
    lines = [md("tree", "measurement", "n", "median s", "min s", "max s", "in-process s", "CPU s",
                "peak RSS MB"), "|---|---|" + "---:|" * 7]
    return lines + [md(v, label, r["n"], fmt(r["median"]), fmt(r["min"]), fmt(r["max"]), fmt(r["inner"]),
                       fmt(r["cpu"], 2), f"{r['rss']:.0f}") for v, rows in results.items() for label, r in rows.items()]


def ratio(rows: dict, a: str, b: str, key: str = "median") -> float | None:
    return rows[a][key] / rows[b][key] if a in rows and b in rows and rows[a][key] is not None else None


def ratios_and_goals(results: dict) -> list[str]:
    ratios = [md("tree", "ratio", "by wall time", "by CPU time"), "|---|---|---:|---:|"]
    goals = [md("tree", "goal (wall-time medians)", "measured", "status"), "|---|---|---|---|"]
    for v, r in results.items():
        q = functools.partial(ratio, r)
        ratios += [md(v, name, fmt(q(a, b), 2), fmt(q(a, b, "cpu"), 2)) for name, a, b in [
            ("cold / floor(files read)", COLD, FILES), ("cold / floor(function spans parsed)", COLD, SPANS),
            ("Fixit / cold", FIXIT, COLD), ("warm / ruff E9", WARM, RUFF), ("touched / cold", TOUCHED, COLD),
            ("moved / cold", MOVED, COLD), ("edited / cold", EDITED, COLD),
            ("edited sample() / cold", EDITED_READ, COLD),
            ("cold 1 core / floor(files read)", COLD_1, FILES),
            ("serial / cold 1 core (shared prefixes)", COLD_0, COLD_1),
            (f"serial / cold all {os.cpu_count()} cores", COLD_0, COLD)]]
        ratios.append(md(v, "cold / floor(files read), in-process (stats.seconds / parse loop)",
                         fmt(q(COLD, FILES, "inner"), 2), "-"))
        rss = max(row["rss"] for label, row in r.items() if label.startswith("warmlint"))
        cold_floor, one_core, fixit, warm, ruff, touched, moved, edited = (
            q(COLD, FILES), q(COLD_1, FILES), q(FIXIT, COLD), r[WARM]["median"], r[RUFF]["median"],
            r[TOUCHED]["median"], r[MOVED]["median"], r[EDITED]["median"])
        in_read = r[EDITED_READ]["median"]
        goals += [md(v, goal, shown, "met" if ok else "**missed**") for goal, shown, ok in [
            ("cold <= 1.3 x LibCST floor of files read", f"{cold_floor:.2f} x", cold_floor <= 1.3),
            ("cold on 1 core <= 1.3 x LibCST floor", f"{one_core:.2f} x", one_core <= 1.3),
            ("cold >= 200 x faster than Fixit", "not run" if fixit is None else f"{fixit:.0f} x",
             fixit is not None and fixit >= 200),
            ("warm <= 0.3 s and faster than ruff E9", f"{warm:.3f} s (ruff {ruff:.3f} s)", warm <= min(0.3, ruff)),
            ("touched sampler.py <= 1 s: a comment appended", f"{touched:.3f} s", touched <= 1),
            ("touched sampler.py <= 1 s: a comment line added on top", f"{moved:.3f} s", moved <= 1),
            ("touched sampler.py <= 1 s: a statement appended", f"{edited:.3f} s", edited <= 1),
            ("touched sampler.py <= 1 s: a statement in sample(), which the analysis reads",
             f"{in_read:.3f} s", in_read <= 1),
            ("peak RSS <= 500 MB", f"{rss:.0f} MB", rss <= 500)]]
    return ratios + [""] + goals


def breakdown(probes: dict, results: dict) -> list[str]:
    cols = [(v, mode) for v in probes for mode in ("cold", "warm", "touched")]
    runs = [probes[v][mode] for v, mode in cols]
    labels = sorted({k for p in runs for k in p["phases"]}, key=lambda k: -runs[-3]["phases"].get(k, 0))
    return [md("phase (ms, exclusive)", *(f"{v} {mode}" for v, mode in cols)), "|---|" + "---:|" * len(cols),
            md("python start-up (median of -c pass)",
               *(f"{results[v]['python start-up (-c pass)']['median'] * 1000:.0f}" for v, _ in cols)),
            *(md(k, *(f"{p['phases'].get(k, 0) * 1000:.0f}" for p in runs)) for k in labels),
            md("**in-process total**", *(f"**{p['total'] * 1000:.0f}**" for p in runs)),
            md("LibCST imported?", *(p["libcst_imported"] for p in runs))]


def render(state: dict, output: Path) -> None:
    """Write results.md from a run's state (also saved as SCRATCH/state.json: see --render)."""
    meta, results = state["meta"], state["results"]
    lines = [
        "# warmlint benchmark results", "",
        f"- date: {meta['date']} (the run took {meta['minutes']} min)",
        f"- machine: {meta['machine']}; load average (1 min) before/after: {meta['load']}",
        "- versions: " + ", ".join(f"{k} {val}" for k, val in meta["versions"].items()),
        f"- warmlint source under test: {meta['source']}",
        f"- command: `{meta['command']}` (from the repo root)",
        f"- trees: copies of `{meta['releases']}/vllm-VERSION` (a fork's: `DIST-VERSION`) under `{meta['scratch']}`; warmlint under test: "
        "`.venv/bin/python -m warmlint.cli check --format json --cache-dir DIR TREE`",
        *(f"- warmlint on {v} (cold probe): " + ", ".join(f"{k} {p['cold']['stats'].get(k)}" for k in
          ("files_parsed", "functions_parsed", "configs", "configs_truncated")) for v, p in state["probes"].items()),
        *(f"- last output line of {label} on {v}: `{r['tail']}`" for v in results
          for label, r in results[v].items() if label in (RUFF, FIXIT)), "",
        "## Timings (wall seconds; repeats interleaved; Fixit once per tree)", "", *table(results), "",
        "## Ratios and goals", "", *ratios_and_goals(results), "",
        "## Where warmlint's time goes (one in-process probe per mode: bench/run.py --probe)", "",
        *breakdown(state["probes"], results), "",
        *(["## Cold runs by cores (bench/scaling.py)", "",
           *scaling.table(results, state["jobs"], md, fmt, _cores(meta)), ""] if state.get("jobs") else []),
        "## Parallel parsing on this machine (bench/parallel_experiment.py)", "", state["parallel"].rstrip(), "",
        MARKER]
    old = output.read_text() if output.exists() else ""
    output.write_text("\n".join(lines) + (old.split(MARKER, 1)[1] if MARKER in old else "\n"))
    print("\n".join(lines[:-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--versions", default="0.21.0,0.33.0,0.34.0,aphrodite-engine==0.24.1",
                        help="vLLM versions, and forks as DIST==VERSION (bench/workloads.py FORKS, "
                             "e.g. aphrodite-engine==0.24.1); all must be in --releases already")
    parser.add_argument("--releases", type=Path,
                        help="default: warmlint's cache's releases/ ($WARMLINT_CACHE_DIR, else ~/.cache/warmlint)")
    parser.add_argument("--scratch", type=Path, default=Path(tempfile.gettempdir()) / "warmlint-bench")
    parser.add_argument("--no-fixit", action="store_true", help="skip Fixit (minutes per tree)")
    parser.add_argument("--no-parallel", action="store_true",
                        help="skip bench/parallel_experiment.py (minutes per tree)")
    parser.add_argument("--output", type=Path, default=BENCH / "results.md")
    parser.add_argument("--ref", help="benchmark this git revision (exported to the scratch dir), "
                        "not the working tree: other people's half-done edits do not leak in")
    parser.add_argument("--jobs", type=scaling.parse, default=[], metavar="N,N",
                        help="also measure cold runs with --jobs N (e.g. 2,4,8; 0 and 1 are always "
                             "measured) and report the speed-ups: bench/scaling.py")
    parser.add_argument("--render", type=Path, metavar="STATE", help="only rewrite --output from a state.json")
    args = parser.parse_args()
    if args.render:
        return render(json.loads(args.render.read_text()), args.output)
    args.output, args.scratch = args.output.resolve(), args.scratch.resolve()
    from warmlint.summary_cache import default_cache_dir  # where `warmlint check --vllm` puts them

    cache = default_cache_dir()
    releases, vs = args.releases or cache / "releases", args.versions.split(",")
    for v in vs:  # an unknown fork, or a release not fetched yet: say so before minutes of set-up
        if not (releases / workloads.tree_name(v)).is_dir():
            raise SystemExit(f"bench: no {releases / workloads.tree_name(v)}; fetch it with `warmlint check "
                             f"{'--pypi ' + v if '==' in v else '--vllm ' + v}` (WARMLINT_CACHE_DIR={cache})")
    # .pyc files go to the scratch dir: measured runs never compile, the repo gets no __pycache__.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(args.scratch / "pycache")
    args.scratch.mkdir(parents=True, exist_ok=True)
    source = use_source(args.ref, args.scratch)
    os.chdir(args.scratch)  # so `python -m` finds warmlint on PYTHONPATH / the install, not in cwd
    load_before, started = os.getloadavg(), datetime.now().astimezone()
    prepared = {v: prepare(v, releases, args.scratch) for v in vs}  # also fills the .pyc cache
    samples = {v: {label: [] for label, _ in specs(prepared[v], args.scratch, args.jobs)} for v in vs}
    for rep in range(args.repeat):
        for v in vs:
            for label, make in specs(prepared[v], args.scratch, args.jobs):
                samples[v][label].append(run_once(make()))
        print(f"repeat {rep + 1}/{args.repeat} done", file=sys.stderr, flush=True)
    results = {v: {label: summarize(s) for label, s in rows.items()} for v, rows in samples.items()}
    for v in vs if not args.no_fixit else ():
        print(f"Fixit on {v}, once ...", file=sys.stderr, flush=True)
        cmd = [str(VENV / "fixit"), "--rules", ".noop:NoOp", "lint", str(prepared[v]["tree"])]
        results[v][FIXIT] = summarize([run_once(cmd, cwd=BENCH / "fixit_rules", ok=None)])
    targets = [":".join(map(str, (prepared[v]["tree"], *prepared[v]["lists"].values()))) for v in vs]
    parallel = "(not run: --no-parallel)"
    if not args.no_parallel:  # minutes per tree; its failure must not lose the timings
        done = subprocess.run([PY, str(BENCH / "parallel_experiment.py"), "--repeat", str(args.repeat),
                               *targets], capture_output=True, text=True)
        parallel = done.stdout if done.returncode == 0 else f"(failed, exit {done.returncode})"
    for path in args.scratch.iterdir():  # the per-run caches
        if path.is_dir() and path.name.startswith(("cold-", "t-", "e-", "probe-")):
            shutil.rmtree(path)
    meta = {"date": f"{started:%Y-%m-%d %H:%M %Z}", "minutes": (datetime.now().astimezone() - started).seconds // 60,
            "machine": machine(), "load": f"{load_before[0]:.2f} / {os.getloadavg()[0]:.2f}", "versions": versions(),
            "source": source, "command": f".venv/bin/python bench/run.py {' '.join(sys.argv[1:])}",
            "releases": str(releases), "scratch": str(args.scratch)}
    probes = {v: {mode: {k: p[k] for k in ("total", "phases", "stats", "libcst_imported")}
                  for mode, p in prepared[v]["probes"].items()} for v in vs}
    state = {"meta": meta, "results": results, "probes": probes, "parallel": parallel, "samples": samples,
             "jobs": args.jobs}
    (args.scratch / "state.json").write_text(json.dumps(state, indent=1))
    render(state, args.output)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--parse"]:
        parse_only(sys.argv[2], sys.argv[3])
    elif sys.argv[1:2] == ["--probe"]:
        probe(sys.argv[2], sys.argv[4:])
    else:
        main()
