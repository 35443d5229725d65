"""GPU cases: each runs ``python -m warmlint.runtime.case`` in a fresh process.

A case is declared on its test with ``@pytest.mark.gpu_case(id=..., release=..., kind=...)``.
Once collection is done, every selected case that can run is started in a small pool
(``WARMLINT_GPU_JOBS``, default 6): a case is mostly vLLM import and Triton compile time,
so running a few at once saves scarce GPU minutes; the events they count do not depend on
it (timings get noisier: use ``WARMLINT_GPU_JOBS=1`` for numbers to publish).

Where a case cannot run (no torch, no CUDA device, release not unpacked, no fixed file
given) its test is skipped with the reason. Every result is written, as soon as it is
known, to ``$WARMLINT_GPU_RESULTS/gpu-results.json``.
"""

from __future__ import annotations

import concurrent.futures
import functools
import importlib.util
import json
import os
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RELEASES = Path(os.environ.get("WARMLINT_RELEASES_DIR", "/tmp/releases"))
JOBS = max(1, int(os.environ.get("WARMLINT_GPU_JOBS", "6")))
CASE_TIMEOUT_S = int(os.environ.get("WARMLINT_CASE_TIMEOUT", "420"))
# Appended to every case command; "--device cpu --vocab 4096 --hidden 64" dry-runs the
# whole machinery on a CPU machine (its verdicts then mean nothing).
CASE_ARGS = shlex.split(os.environ.get("WARMLINT_CASE_ARGS", ""))
CPU_DRY_RUN = "--device=cpu" in CASE_ARGS or ("--device", "cpu") in zip(CASE_ARGS, CASE_ARGS[1:])
_LOCK = threading.RLock()
_RESULTS: dict = {"cases": {}, "vllm_modules": {}}
_NODE_CASE: dict = {}


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "gpu_case(id, release, kind, batch=256, warmup='original', env=None, "
        "prediction='', speculative=False, runner='auto'): one warmup + request run by "
        "warmlint.runtime.case in a fresh process")


@functools.cache
def cuda_skip_reason() -> str | None:
    if importlib.util.find_spec("torch") is None:
        return "torch is not installed: GPU cases run on a CUDA machine (tools/run_gpu_tests.sh)"
    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - a broken torch is a reason to skip, not fail
        return f"torch does not import here ({type(exc).__name__}: {exc})"
    if not torch.cuda.is_available() and not CPU_DRY_RUN:
        return "torch sees no CUDA device on this machine"
    return None


def fixed_runner_var(release: str, runner: str = "auto") -> str:
    """WARMLINT_FIXED_RUNNER_0_20_0 (v1) or WARMLINT_FIXED_RUNNER_V2_0_26_0 (v2)."""
    return ("WARMLINT_FIXED_RUNNER_V2_" if runner == "v2" else "WARMLINT_FIXED_RUNNER_") + \
        release.replace(".", "_")


def case_spec(marker) -> dict:
    spec = {"batch": 256, "warmup": "original", "env": {}, "prediction": "", "speculative": False,
            "runner": "auto", **marker.kwargs}
    spec["env"] = dict(spec["env"] or {})
    return spec


def case_skip_reason(spec: dict) -> str | None:
    reason = cuda_skip_reason()
    if reason:
        return reason
    release = RELEASES / spec["release"]
    if not (release / "vllm" / "__init__.py").is_file():
        return (f"vLLM {spec['release']} is not unpacked under {RELEASES} "
                "(tools/run_gpu_tests.sh does it)")
    if spec["warmup"] == "fixed":
        var = fixed_runner_var(spec["release"], spec["runner"])
        path = os.environ.get(var)
        if not path:
            return f"{var} is not set: give it the gpu_model_runner.py that `warmlint fix` wrote"
        if not Path(path).is_file():
            return f"{var}={path} does not exist"
    if spec["warmup"] == "plugin":
        try:
            from warmlint import plugin
        except Exception as exc:  # noqa: BLE001
            return f"warmlint.plugin does not import ({type(exc).__name__}: {exc})"
        if not hasattr(plugin, "fixed_dummy_sampler_run_source"):
            return "warmlint.plugin has no fixed_dummy_sampler_run_source()"
    return None


def _command(spec: dict, out: Path) -> list:
    """The case's command line; its fresh compile caches go next to its JSON."""
    warmup = spec["warmup"]
    if warmup == "fixed":
        warmup = "file:" + os.environ[fixed_runner_var(spec["release"], spec["runner"])]
    cmd = [sys.executable, "-m", "warmlint.runtime.case", "--release-dir",
           str(RELEASES / spec["release"]), "--warmup", warmup, "--kind", spec["kind"],
           "--batch", str(spec["batch"]), "--json", str(out),
           "--cache-root", str(out.with_suffix(".caches")), "--runner", spec["runner"]]
    for name, value in spec["env"].items():
        cmd += ["--env", f"{name}={value}"]
    if spec["speculative"]:
        cmd.append("--speculative")
    return cmd + CASE_ARGS


class CaseRunner:
    """Runs cases in a thread pool, each in its own process; results by case id."""

    def __init__(self) -> None:
        self.pool = concurrent.futures.ThreadPoolExecutor(JOBS, thread_name_prefix="gpu-case")
        self.futures: dict = {}
        self.procs: set = set()
        self.tmp = Path(tempfile.mkdtemp(prefix="warmlint-gpu-cases-"))

    def submit(self, spec: dict):
        with _LOCK:
            if spec["id"] not in self.futures:
                self.futures[spec["id"]] = self.pool.submit(self._run, spec)
            return self.futures[spec["id"]]

    def _run(self, spec: dict) -> dict:
        out = self.tmp / f"{spec['id']}.json"
        # The parent's VLLM_* settings must not leak in: "default config" means default.
        env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_")}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
        began = time.time()
        proc = subprocess.Popen(_command(spec, out), cwd=REPO, env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.procs.add(proc)
        try:
            output, _ = proc.communicate(timeout=CASE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            output, _ = proc.communicate()
        finally:
            self.procs.discard(proc)
        try:
            result = json.loads(out.read_text())
        except (OSError, ValueError) as exc:  # died before writing (a crash, a kill)
            result = {"status": "error", "error": f"no result JSON ({exc})"}
        if proc.returncode in (-9, 137) and result.get("status") != "ok":
            result["status"] = "timeout"
        result.update(returncode=proc.returncode, elapsed_s=round(time.time() - began, 2),
                      output_tail=output[-6000:])
        record(spec, result=result)
        return result

    def close(self) -> None:
        for proc in list(self.procs):  # only the processes this runner started
            proc.kill()
        self.pool.shutdown(wait=True, cancel_futures=True)


def _runner(config) -> CaseRunner:
    with _LOCK:
        if not hasattr(config, "_warmlint_cases"):
            config._warmlint_cases = CaseRunner()
        return config._warmlint_cases


def record(spec: dict, **fields) -> None:
    """Merge fields into the case's entry and rewrite the results file (if one is asked for)."""
    with _LOCK:
        entry = _RESULTS["cases"].setdefault(spec["id"], {"spec": spec})
        result = fields.pop("result", None)
        if result is not None:
            modules = result.pop("vllm_modules", None)
            if modules:
                known = set(_RESULTS["vllm_modules"].get(spec["release"], []))
                _RESULTS["vllm_modules"][spec["release"]] = sorted(known | set(modules))
            entry["result"] = result
        entry.update(fields)
        where = os.environ.get("WARMLINT_GPU_RESULTS")
        if where:
            path = Path(where) / "gpu-results.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".json.part")
            tmp.write_text(json.dumps(_RESULTS, indent=1, default=str) + "\n")
            os.replace(tmp, path)


def pytest_collection_finish(session):
    """Start every selected, runnable case now, so they overlap."""
    specs = [case_spec(m) for item in session.items
             if (m := item.get_closest_marker("gpu_case")) is not None]
    if not specs or cuda_skip_reason():
        return
    for spec in specs:
        if case_skip_reason(spec) is None:
            _runner(session.config).submit(spec)


def pytest_runtest_logreport(report):
    case_id = _NODE_CASE.get(report.nodeid)
    if case_id is None or (report.when != "call" and report.passed):
        return
    longrepr = report.longrepr
    if report.skipped and isinstance(longrepr, tuple):
        longrepr = longrepr[-1]  # (path, line, "Skipped: reason")
    message = "" if report.passed else str(longrepr)[-3000:]
    record({"id": case_id}, test={"nodeid": report.nodeid, "outcome": report.outcome,
                                  "message": message})


def pytest_sessionfinish(session):
    runner = getattr(session.config, "_warmlint_cases", None)
    if runner is not None:
        runner.close()


@pytest.fixture
def gpu_case(request) -> dict:
    """The finished case of this test (its ``gpu_case`` marker): the case's JSON as a dict."""
    marker = request.node.get_closest_marker("gpu_case")
    assert marker is not None, "gpu_case fixture used without a @pytest.mark.gpu_case"
    spec = case_spec(marker)
    _NODE_CASE[request.node.nodeid] = spec["id"]
    reason = case_skip_reason(spec)
    if reason:
        record(spec, skipped=reason)
        pytest.skip(reason)
    result = _runner(request.config).submit(spec).result()
    if result.get("status") == "skipped":
        pytest.skip(result.get("reason", "the case skipped itself"))
    if result.get("status") != "ok":
        detail = (result.get("error") or "")[-3000:] + "\n--- case output (tail) ---\n" + \
            result.get("output_tail", "")[-2000:]
        pytest.fail(f"case {spec['id']} ended with status {result.get('status')} "
                    f"(exit {result.get('returncode')}):\n{detail}", pytrace=False)
    return result
