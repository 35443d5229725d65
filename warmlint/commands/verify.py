"""``warmlint verify``: run a release's real warmup and a request matrix on a GPU."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from warmlint.config import UsageError


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "verify", help="check the static verdicts against real JIT events (needs a CUDA GPU)")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--release-dir", type=Path, metavar="DIR",
                       help="a directory holding a release's vllm/ and vllm-X.dist-info/")
    where.add_argument("--vllm", metavar="VERSION", help="a release from PyPI (cached)")
    parser.add_argument("--warmup", default="original",
                        help="original | file:PATH (a fixed gpu_model_runner.py) | plugin")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="config for the cases, e.g. VLLM_USE_FLASHINFER_SAMPLER=1")
    parser.add_argument("--logprobs-mode", default="raw_logprobs")
    parser.add_argument("--kinds", default=",".join(_kinds()),
                        help="comma-separated request kinds")
    parser.add_argument("--batches", default="1,37,256", help="comma-separated batch sizes")
    parser.add_argument("--jobs", type=int, default=4, help="cases run at once")
    parser.add_argument("--format", choices=["text", "json"], default="text")
    parser.add_argument("--output", "-o", type=Path, metavar="FILE")
    parser.add_argument("--cases-dir", type=Path, metavar="DIR",
                        help="keep each case's JSON here")


def _kinds():
    from warmlint.verify import KINDS

    return KINDS


def run(args) -> int:
    from warmlint import verify

    config = {"logprobs_mode": args.logprobs_mode}
    for item in args.env:
        name, sep, value = item.partition("=")
        if not sep:
            raise UsageError(f"--env expects NAME=VALUE, got '{item}'")
        config[name] = value
    kinds = [k for k in args.kinds.split(",") if k]
    unknown = [k for k in kinds if k not in verify.KINDS]
    if unknown:
        raise UsageError(f"unknown request kind(s): {', '.join(unknown)}")
    try:
        batches = [int(b) for b in args.batches.split(",") if b]
    except ValueError:
        raise UsageError("--batches expects comma-separated integers") from None
    if args.vllm is not None:
        from warmlint.download import DownloadError, fetch_release

        if not args.vllm.strip():
            raise UsageError("--vllm needs a version, e.g. --vllm 0.20.0")

        try:
            release = fetch_release(args.vllm)
        except DownloadError as exc:
            raise UsageError(str(exc)) from None
    else:
        release = args.release_dir
        if not (release / "vllm" / "__init__.py").is_file():
            raise UsageError(f"{release}: no vllm/ package there")
    if not verify.cuda_available():
        raise UsageError("no CUDA device (or no torch) here: verify runs vLLM's sampler on a "
                         "GPU; see docs/gpu-proof.md for running it on a GPU machine")
    report = verify.verify(release, args.warmup, config, kinds, batches, args.jobs,
                           args.cases_dir)
    text = (json.dumps(report, indent=1) + "\n" if args.format == "json"
            else verify.render_text(report))
    if args.output:
        from warmlint.files import write_file

        try:
            write_file(args.output, text.encode())
        except OSError as exc:
            raise UsageError(f"{args.output}: cannot write: {exc.strerror or exc}") from None
    else:
        sys.stdout.write(text)
    return 1 if any(r["verdict"] in ("unexplained", "error") for r in report["rows"]) else 0
