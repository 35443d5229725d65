#!/usr/bin/env python3
"""The plugin inside a real vLLM: entry point, plugin loader, runner imports (GPU machine).

    python tools/gpu_plugin_check.py --release-dir /tmp/releases/0.26.0 --json OUT.json

CPU CI has no torch, so its plugin tests run a fixture ``vllm`` package; this script runs
the real one. It makes warmlint a distribution with its ``vllm.general_plugins`` entry
point (a ``dist-info`` next to the checkout, as ``pip install`` would write it), then, in
fresh processes started the way a vLLM worker starts (``vllm.plugins.load_general_plugins()``
before the runner modules are imported), imports both model runners of the release and
records whether each ``_dummy_sampler_run`` was upgraded, the source it runs, and how long
the start took: the first start analyzes the installed vLLM, the second is a cache hit.
A third start with ``WARMLINT_PLUGIN=0`` must leave both runners alone.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--release-dir", required=True, type=Path)
    parser.add_argument("--json", required=True, type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="warmlint-plugin-") as tmp:
        dist, cache = Path(tmp) / "dist", Path(tmp) / "cache"
        make_distribution(dist)
        runs = {"first": start(args.release_dir, dist, cache),
                "second": start(args.release_dir, dist, cache),
                "disabled": start(args.release_dir, dist, cache, WARMLINT_PLUGIN="0")}
    args.json.write_text(json.dumps(runs, indent=1))
    for name, run in runs.items():
        upgraded = {k.rsplit(".", 1)[-1]: v.get("upgraded", v.get("import_error"))
                    for k, v in run.get("runners", {}).items()}
        print(f"{name}: rc {run['rc']}, {run['wall_s']} s, plugin load "
              f"{run.get('plugin_load_s')} s, upgraded {upgraded}")
        for line in run["log"]:
            print("   ", line[:300])
        if run["rc"]:
            print(run.get("stderr_tail", ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
