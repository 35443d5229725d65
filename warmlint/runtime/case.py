"""One GPU case in a fresh process: build the runner, run the warmup, then one request.

    python -m warmlint.runtime.case --release-dir /tmp/releases/0.20.0 \\
        --warmup original|file:PATH|plugin|none --env VLLM_USE_FLASHINFER_SAMPLER=1 \\
        --kind seeded --batch 256 --json OUT.json [--runner auto|v1|v2]

``--runner v2`` runs the model runner v2 (``vllm/v1/worker/gpu/``, ``harness_v2``);
``auto`` (the default) picks v2 where the tree has only that runner or the config sets
``VLLM_USE_V2_MODEL_RUNNER=1``. The JSON's ``warmup`` holds the start-up cost of the warmup
under test: its wall time and its peak GPU memory above what was allocated before it.

A fresh process (with fresh Triton/Inductor caches) is the only honest start: Triton's and
Dynamo's in-process caches cannot be emptied. The JSON is written whatever happens, with
``status`` ok | skipped | error (and the traceback); the exit code is 0, 0 and 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

from warmlint.runtime.first_profile import FirstStepProfile
from warmlint.runtime.jitcount import fresh_compile_caches


def _args(argv):
    parser = argparse.ArgumentParser(prog="python -m warmlint.runtime.case", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--release-dir", required=True, type=Path,
                        help="folder holding the release's vllm/ and vllm-X.dist-info/")
    parser.add_argument("--warmup", default="original",
                        help="original | file:PATH (a fixed gpu_model_runner.py) | plugin | none")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="set before vLLM is imported (repeatable)")
    parser.add_argument("--kind", default="seeded",
                        help="request kind (harness.KINDS; harness.SPEC_KINDS with --speculative)")
    parser.add_argument("--speculative", action="store_true",
                        help="a deployment with a drafter: the runner has a rejection sampler")
    parser.add_argument("--runner", default="auto", choices=("auto", "v1", "v2"),
                        help="which model runner's warmup and sampler (default: from the tree)")
    parser.add_argument("--no-warmup-kernels", dest="warmup_kernels", action="store_false",
                        help="v2: run _dummy_sampler_run alone, not warmup_kernels' sampler steps")
    parser.add_argument("--max-model-len", type=int, default=2048,
                        help="v2: RequestState's max_model_len (its token buffer's row length)")
    parser.add_argument("--batch", type=int, default=256, help="request batch size")
    parser.add_argument("--warmup-batch", type=int, default=256, help="max_num_seqs at start-up")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--logprobs-mode", default="raw_logprobs")
    parser.add_argument("--vocab", type=int, default=128_256)
    parser.add_argument("--hidden", type=int, default=4096)
    parser.add_argument("--device", default="cuda:0", help="cpu runs a dry run of the harness")
    parser.add_argument("--dtype", default="bfloat16", help="lm_head and logits dtype")
    parser.add_argument("--json", required=True, type=Path, help="where the result goes")
    parser.add_argument("--cache-root", type=Path,
                        help="parent of the fresh compile caches (default: a new temp folder)")
    return parser.parse_args(argv)


def _write(path: Path, result: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".part")
    tmp.write_text(json.dumps(result, indent=1, default=str) + "\n")
    os.replace(tmp, path)


def _versions() -> dict:
    import importlib.metadata as md

    import torch

    out = {"torch": torch.__version__, "python": sys.version.split()[0]}
    for dist in ("vllm", "triton", "flashinfer-python", "apache-tvm-ffi"):
        try:
            out[dist] = md.version(dist)
        except md.PackageNotFoundError:
            out[dist] = None
    if torch.cuda.is_available():
        out["gpu"] = torch.cuda.get_device_name(0)
        out["capability"] = ".".join(map(str, torch.cuda.get_device_capability(0)))
    return out


def map_package_dirs() -> list[str]:
    """From a source checkout, make ``[tool.setuptools.package-dir]`` packages importable.

    An installed warmlint maps ``warmlint.rules`` to the repo's ``rules/``; a checkout on
    PYTHONPATH (the GPU machine) does not, and the plugin's analysis imports it.
    """
    import importlib.util

    import warmlint

    pyproject = Path(warmlint.__file__).resolve().parent.parent / "pyproject.toml"
    if sys.version_info < (3, 11) or not pyproject.is_file():
        return []
    import tomllib

    table = tomllib.loads(pyproject.read_text()).get("tool", {}).get("setuptools", {})
    mapped = []
    for name, folder in table.get("package-dir", {}).items():
        init = pyproject.parent / folder / "__init__.py"
        if not name or name in sys.modules or not init.is_file():
            continue
        try:
            if importlib.util.find_spec(name) is not None:
                continue
        except ImportError:
            pass
        spec = importlib.util.spec_from_file_location(
            name, init, submodule_search_locations=[str(init.parent)])
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        mapped.append(name)
    return mapped


def _check_vllm(release_dir: Path) -> str:
    import vllm

    where = Path(vllm.__file__).resolve()
    if release_dir.resolve() not in where.parents:
        raise RuntimeError(f"imported vllm from {where}, not from {release_dir}")
    return str(where.parent)


def run(args, result: dict) -> None:
    import torch

    from warmlint.runtime import harness

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        result.update(status="skipped", reason="torch sees no CUDA device")
        return
    result["versions"] = _versions()
    result["vllm_package"] = _check_vllm(args.release_dir)
    if result["runner"] == "v2":
        return run_v2(args, result)
    function, info = harness.load_warmup(args.release_dir, args.warmup)
    result["warmup_source"] = info
    runner = harness.build_runner(logprobs_mode=args.logprobs_mode, vocab=args.vocab,
                                  hidden=args.hidden, device=args.device, dtype=args.dtype,
                                  max_num_seqs=args.warmup_batch, speculative=args.speculative)
    result["speculative"] = args.speculative
    from vllm.platforms import current_platform

    result["platform"] = type(current_platform).__name__
    result["sampler_forward"] = runner.sampler.topk_topp_sampler.forward.__name__
    if function is not None:
        runner.bind(function)
        result["warmup"] = harness.run_warmup(runner, args.warmup_batch)
    profile = FirstStepProfile()
    steps = harness.run_steps(runner, args.kind, args.batch, steps=args.steps, profile=profile)
    _finish(args, result, steps, profile)


def _finish(args, result: dict, steps: list, profile: FirstStepProfile) -> None:
    result["steps"] = [{"seconds": round(s, 4), "events": ev.as_dict()} for ev, s in steps]
    first, rest = steps[0], steps[1:]
    result["request"] = {
        "kind": args.kind, "batch": args.batch, "events": first[0].as_dict(),
        "first_s": round(first[1], 4), "second_s": round(rest[0][1], 4) if rest else None,
    }
    if profile.entries is not None:
        result["first_step_profile"] = profile.entries
    result["vllm_modules"] = sorted(m for m in sys.modules if m == "vllm" or m.startswith("vllm."))
    result["status"] = "ok"


def run_v2(args, result: dict) -> None:
    """The model runner v2: its Sampler, its warmup(s), one request batch (harness_v2)."""
    from warmlint.runtime import harness_v2

    if args.speculative:
        raise ValueError("--speculative is a v1 deployment here (its RejectionSampler); the "
                         "v2 harness has no speculator")
    function, info = harness_v2.load_warmup(args.release_dir, args.warmup)
    result["warmup_source"] = info
    runner, built = harness_v2.build_runner(
        logprobs_mode=args.logprobs_mode, vocab=args.vocab, hidden=args.hidden,
        device=args.device, dtype=args.dtype, max_num_seqs=args.warmup_batch,
        max_model_len=args.max_model_len)
    result["runner_build"] = built
    from vllm.platforms import current_platform

    result["platform"] = type(current_platform).__name__
    result["sampler_forward"] = "flashinfer" if built["use_flashinfer"] else "triton/pytorch"
    if function is not None:
        runner.bind(function)
        result["warmup"] = harness_v2.run_warmup(runner, args.warmup_batch,
                                                 kernels=args.warmup_kernels)
    profile = FirstStepProfile()
    steps = harness_v2.run_steps(runner, args.kind, args.batch, steps=args.steps,
                                 profile=profile)
    _finish(args, result, steps, profile)


def main(argv=None) -> int:
    args = _args(argv)
    result = {"argv": sys.argv[1:] if argv is None else list(argv), "status": "error",
              "release": args.release_dir.name, "warmup_mode": args.warmup,
              "kind": args.kind, "batch": args.batch, "env": {}, "runner": args.runner}
    began = time.time()
    try:
        for item in args.env:
            name, sep, value = item.partition("=")
            if not sep:
                raise SystemExit(f"--env wants NAME=VALUE, got {item!r}")
            os.environ[name] = value
            result["env"][name] = value
        if not (args.release_dir / "vllm" / "__init__.py").is_file():
            raise FileNotFoundError(f"no vllm/ package under {args.release_dir}")
        from warmlint.runtime.requests import detect_runner, parse_kind

        if args.runner == "auto":
            result["runner"] = detect_runner(args.release_dir, result["env"])
        parse_kind(args.kind, result["runner"])  # an unknown kind fails before any import
        root = args.cache_root or Path(tempfile.mkdtemp(prefix="warmlint-case-"))
        result["compile_caches"] = fresh_compile_caches(root)
        from warmlint.runtime.harness import ensure_c_stubs

        result["c_stubs_made"] = ensure_c_stubs(args.release_dir)
        sys.path.insert(0, str(args.release_dir.resolve()))
        result["package_dirs_mapped"] = map_package_dirs()
        run(args, result)
    except BaseException as exc:  # noqa: BLE001 - the JSON must say what went wrong
        result["status"] = "error"
        result["error"] = "".join(traceback.format_exception(exc))
        if isinstance(exc, KeyboardInterrupt):
            raise
    finally:
        result["wall_s"] = round(time.time() - began, 2)
        _write(args.json, result)
        req = result.get("request", {}).get("events", {})
        warm = result.get("warmup") or {}
        cost = (f" warmup={warm['seconds']}s +{warm['memory_extra_bytes'] / 1e6:.1f}MB"
                if "seconds" in warm else "")
        print(f"warmlint case {result['release']} {result['runner']} {args.warmup} "
              f"{args.kind}@{args.batch}: {result['status']} first-step "
              f"events={req.get('total')} kernels={req.get('triton_kernels')} "
              f"dynamo={req.get('dynamo')}{cost}", flush=True)
    return 0 if result["status"] in ("ok", "skipped") else 1


if __name__ == "__main__":
    sys.exit(main())
