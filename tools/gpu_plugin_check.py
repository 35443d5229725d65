#!/usr/bin/env python3
"""The plugin inside a real vLLM: entry point, plugin loader, runner imports (GPU machine).

    python tools/gpu_plugin_check.py --release-dir /tmp/releases/0.26.0 --json OUT.json
    python tools/gpu_plugin_check.py --verdict --json docs/gpu/plugin-check-real-0.26.0.json

CPU CI has no torch, so its plugin tests run a fixture ``vllm`` package; this script runs
the real one. It makes warmlint a distribution with its ``vllm.general_plugins`` entry
point (a ``dist-info`` next to the checkout, as ``pip install`` would write it), then, in
fresh processes started the way a vLLM worker starts (``vllm.plugins.load_general_plugins()``
before the runner modules are imported), imports both model runners of the release and
records whether each ``_dummy_sampler_run`` was upgraded, the source it runs, and how long
the start took: the first start analyzes the installed vLLM, the second is a cache hit.
A third start with ``WARMLINT_PLUGIN=0`` must leave both runners alone.

Then hostile and broken inputs (issue 13), each a fresh start that must import vLLM and
both runners (rc 0) and leave each runner either upgraded from a fresh analysis or
unchanged: ``forged`` (every cached plugin result's ``source`` replaced by a method that
writes a marker file: it must never run, and the marker must not exist), ``garbage``
(every cache file overwritten with bytes that are not JSON), ``cache_is_a_file``
(``WARMLINT_CACHE_DIR`` names a regular file), ``bad_setting`` (``WARMLINT_PLUGIN_FIX``
set to a value it does not know: logged, runners unchanged). When ``--release-dir`` holds
a complete vLLM (its wheel unpacked, compiled extensions included), the runner modules
import for real.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

WORKER = r'''
import json, logging, sys, time
logging.basicConfig(level=logging.INFO, stream=sys.stderr)
begin = time.perf_counter()
import vllm.plugins
vllm.plugins.load_general_plugins()
loaded = time.perf_counter()
out = {"plugin_load_s": round(loaded - begin, 3), "runners": {}}
for name in ("vllm.v1.worker.gpu.model_runner", "vllm.v1.worker.gpu_model_runner"):
    try:
        module = __import__(name, fromlist=["GPUModelRunner"])
    except Exception as exc:  # the release lacks it, or a dependency is missing here
        out["runners"][name] = {"import_error": f"{type(exc).__name__}: {exc}"[:300]}
        continue
    method = module.GPUModelRunner._dummy_sampler_run
    out["runners"][name] = {"upgraded": bool(getattr(method, "__warmlint__", False)),
                            "source": getattr(method, "__warmlint_source__", None)}
out["total_s"] = round(time.perf_counter() - begin, 3)
print(json.dumps(out))
'''


def make_distribution(where: Path) -> None:
    """warmlint's dist-info with its entry points, as pip would install it."""
    info = where / "warmlint-0.0.0+checkout.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: warmlint\nVersion: 0.0.0\n")
    (info / "entry_points.txt").write_text(
        "[vllm.general_plugins]\nwarmlint_seeded_warmup = warmlint.plugin:register\n")


def start(release_dir: Path, dist: Path, cache: Path, **env) -> dict:
    path = os.pathsep.join([str(release_dir), str(dist), str(REPO), os.environ.get(
        "PYTHONPATH", "")])
    full = {**os.environ, "PYTHONPATH": path, "WARMLINT_CACHE_DIR": str(cache), **env}
    begin = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", WORKER], capture_output=True, text=True,
                          env=full, timeout=900)
    result = {"rc": proc.returncode, "wall_s": round(time.perf_counter() - begin, 3),
              "log": [line for line in proc.stderr.splitlines() if "warmlint" in line][-6:]}
    if proc.returncode == 0:
        result.update(json.loads(proc.stdout.strip().splitlines()[-1]))
    else:
        result["stderr_tail"] = proc.stderr[-2000:]
    return result


def forge(cache: Path, marker: Path) -> int:
    """Every cached result with a ``source`` gets one that writes ``marker`` as soon as
    it is executed (a default argument runs when the ``def`` does) or called."""
    hostile = (f"def _dummy_sampler_run(self, _=open({str(marker)!r}, 'w'), *args, **kw):\n"
               f"    open({str(marker)!r}, 'w').write('ran')\n")
    count = 0
    for path in (cache / "results").glob("*.json"):
        data = json.loads(path.read_text())
        result = data.get("result")
        if isinstance(result, dict) and "source" in result:
            result["source"] = hostile
            path.write_text(json.dumps(data))
            count += 1
    return count


def garble(cache: Path) -> int:
    count = 0
    for path in cache.rglob("*"):
        if path.is_file():
            path.write_bytes(b"\x80not json\x00" * 7)
            count += 1
    return count


UPGRADED = ("first", "second", "forged", "garbage", "cache_is_a_file")
UNCHANGED = ("disabled", "bad_setting")


def verdict(runs: dict, complete: bool = True) -> list[str]:
    """What went wrong, if anything: a start that failed, a runner upgraded where it must
    be left alone (or not upgraded where the installed vLLM gets a fix), a forged source
    installed or run, a hostile input not actually applied. ``complete``: the release is a
    whole vLLM, so every runner module must import."""
    problems = []
    for name in UPGRADED + UNCHANGED:
        run = runs.get(name)
        if run is None:
            problems.append(f"{name}: not run")
            continue
        if run.get("rc") != 0:
            problems.append(f"{name}: vLLM's start failed (rc {run.get('rc')})")
            continue
        if not run.get("runners"):
            problems.append(f"{name}: no runner module was tried")
        for module, runner in run.get("runners", {}).items():
            if "import_error" in runner:
                if complete:
                    problems.append(f"{name}: {module} did not import: {runner['import_error']}")
                continue
            want = name in UPGRADED
            if runner.get("upgraded") is not want:
                problems.append(f"{name}: {module} upgraded={runner.get('upgraded')}, "
                                f"expected {want}")
    forged = runs.get("forged", {})
    if forged.get("marker_exists") is not False:
        problems.append("forged: the forged source ran (its marker file exists), or no check")
    if forged.get("forged_source_installed") is not False or not forged.get("entries_forged"):
        problems.append("forged: no cached source was forged, or a forged one was installed")
    if not runs.get("garbage", {}).get("files_garbled"):
        problems.append("garbage: no cache file was garbled")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--release-dir", type=Path)
    parser.add_argument("--json", required=True, type=Path,
                        help="where to write the runs (with --verdict: the runs to judge)")
    parser.add_argument("--verdict", action="store_true",
                        help="judge the runs in --json again; start nothing")
    parser.add_argument("--fixture", action="store_true",
                        help="the release is a fixture tree, not a whole vLLM: a runner "
                             "module that does not import is not a failure")
    args = parser.parse_args()
    if args.verdict:
        problems = verdict(json.loads(args.json.read_text()), not args.fixture)
        print("\n".join(problems) or "plugin check: every start as expected")
        return 1 if problems else 0
    if args.release_dir is None:
        parser.error("--release-dir is required")
    with tempfile.TemporaryDirectory(prefix="warmlint-plugin-") as tmp:
        tmp = Path(tmp)
        dist, cache = tmp / "dist", tmp / "cache"
        make_distribution(dist)
        runs = {"first": start(args.release_dir, dist, cache)}  # analyzes, fills the cache
        # The rest are independent (each on its own copy of the cache): run them at once.
        caches = {name: tmp / f"cache-{name}" for name in ("forged", "garbage", "bad_setting")}
        for copy in caches.values():
            shutil.copytree(cache, copy)
        marker = tmp / "forged-source-ran"
        forged, garbled = forge(caches["forged"], marker), garble(caches["garbage"])
        not_a_dir = tmp / "cache-file"
        not_a_dir.write_text("a file, not a directory\n")
        jobs = {"second": (cache, {}), "disabled": (cache, {"WARMLINT_PLUGIN": "0"}),
                "forged": (caches["forged"], {}),
                "garbage": (caches["garbage"], {}), "cache_is_a_file": (not_a_dir, {}),
                "bad_setting": (caches["bad_setting"], {"WARMLINT_PLUGIN_FIX": "bogus"})}
        with ThreadPoolExecutor(len(jobs)) as pool:
            futures = {name: pool.submit(start, args.release_dir, dist, where, **env)
                       for name, (where, env) in jobs.items()}
            runs.update({name: future.result() for name, future in futures.items()})
        runs["forged"]["entries_forged"] = forged
        runs["forged"]["marker_exists"] = marker.exists()
        runs["forged"]["forged_source_installed"] = any(
            str(marker) in (r.get("source") or "") for r in runs["forged"].get("runners", {}).values())
        runs["garbage"]["files_garbled"] = garbled
    args.json.write_text(json.dumps(runs, indent=1))
    for name, run in runs.items():
        upgraded = {k.rsplit(".", 1)[-1]: v.get("upgraded", v.get("import_error"))
                    for k, v in run.get("runners", {}).items()}
        extra = {k: run[k] for k in ("entries_forged", "files_garbled", "marker_exists",
                                            "forged_source_installed")
                 if k in run}
        print(f"{name}: rc {run['rc']}, {run['wall_s']} s, plugin load "
              f"{run.get('plugin_load_s')} s, upgraded {upgraded} {extra or ''}")
        for line in run["log"]:
            print("   ", line[:300])
        if run["rc"]:
            print(run.get("stderr_tail", ""))
    problems = verdict(runs, not args.fixture)
    print("\n".join(problems) or "plugin check: every start as expected")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
