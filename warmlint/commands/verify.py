"""``warmlint verify``: run a release's real warmup and a request matrix on a GPU."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from warmlint.settings_file import UsageError


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "verify", help="check the static verdicts against real JIT events (needs a CUDA GPU)")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--release-dir", type=Path, metavar="DIR",
                       help="a directory holding a release's vllm/ and vllm-X.dist-info/")
    where.add_argument("--vllm", metavar="VERSION", help="a release from PyPI (cached)")
    parser.add_argument("--runner", choices=("auto", "v1", "v2"), default="auto",
                        help="model runner: v1 (gpu_model_runner.py) or v2 (worker/gpu/); "
                             "auto: v2 where the tree has only v2 or the config sets "
                             "VLLM_USE_V2_MODEL_RUNNER=1")
    parser.add_argument("--warmup", action="append", default=[],
                        help="original | file:PATH (a fixed runner file) | plugin (v1); "
                             "repeat it to run each and compare them (default: original)")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="config for the cases, e.g. VLLM_USE_FLASHINFER_SAMPLER=1")
    parser.add_argument("--logprobs-mode", default="raw_logprobs")
    parser.add_argument("--kinds", help="comma-separated request kinds, a count after ':' "
                                        "(logprobs:20); default: the runner's matrix")
    parser.add_argument("--batches", help="comma-separated batch sizes, run in this order "
                                          "(default 1,8,37,256)")
    parser.add_argument("--jobs", type=int, default=4, help="cases run at once")
    parser.add_argument("--deadline", type=float, metavar="EPOCH_S",
                        help="start no case after this time (seconds since the epoch); the "
                             "rest are reported as skipped")
    parser.add_argument("--format", choices=["text", "json"], default="text")
    parser.add_argument("--output", "-o", type=Path, metavar="FILE",
                        help="write the report here (rewritten as each cell finishes)")
    parser.add_argument("--cases-dir", type=Path, metavar="DIR",
                        help="keep each case's JSON here")


def _batches(text: str | None):
    if not text:
        return None
    try:
        return [int(b) for b in text.split(",") if b]
    except ValueError:
        raise UsageError("--batches expects comma-separated integers") from None


def _render(reports: list, fmt: str, verify) -> str:
    if fmt == "json":
        body = reports[0] if len(reports) == 1 else {"reports": reports}
        return json.dumps(body, indent=1) + "\n"
    text = "\n".join(verify.render_text(r) for r in reports)
    if len(reports) > 1:
        text += "\n" + verify.render_compare(reports)
    return text


def run(args) -> int:
    from warmlint import verify

    config = {"logprobs_mode": args.logprobs_mode}
    for item in args.env:
        name, sep, value = item.partition("=")
        if not sep:
            raise UsageError(f"--env expects NAME=VALUE, got '{item}'")
        config[name] = value
    kinds = [k for k in (args.kinds or "").split(",") if k] or None
    batches = _batches(args.batches)
    if args.vllm:
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
    from warmlint.runtime.requests import detect_runner, parse_kind

    runner = detect_runner(release, config) if args.runner == "auto" else args.runner
    for kind in kinds or []:
        try:
            parse_kind(kind, runner)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    warmups = args.warmup or ["original"]
    if runner == "v2" and "plugin" in warmups:
        raise UsageError("--warmup plugin upgrades the v1 runner only; for v2 give a fixed "
                         "vllm/v1/worker/gpu/model_runner.py as file:PATH")
    if args.deadline is not None and args.deadline < time.time():
        raise UsageError("--deadline is in the past")
    if verify.cpu_dry_run():
        sys.stderr.write("warmlint verify: a CPU dry run (WARMLINT_CASE_ARGS has --device cpu): "
                         "the machinery runs, its verdicts mean nothing\n")
    elif not verify.cuda_available():
        raise UsageError("no CUDA device (or no torch) here: verify runs vLLM's sampler on a "
                         "GPU; see docs/gpu-proof.md for running it on a GPU machine")
    reports: list = []

    def write(partial: list) -> None:
        text = _render(partial, args.format, verify)
        if args.output:
            from warmlint.files import write_file

            try:
                write_file(args.output, text.encode())
            except OSError as exc:
                raise UsageError(f"{args.output}: cannot write: {exc.strerror or exc}") from None

    for i, warmup in enumerate(warmups):
        cases_dir = args.cases_dir / f"warmup-{i}" if args.cases_dir and len(warmups) > 1 \
            else args.cases_dir
        report = verify.verify(release, warmup, config, kinds, batches, args.jobs, cases_dir,
                               runner=runner, deadline=args.deadline,
                               progress=lambda part: write(reports + [part]))
        reports.append(report)
    text = _render(reports, args.format, verify)
    write(reports)
    if not args.output:
        sys.stdout.write(text)
    bad = ("unexplained", "error")
    return 1 if any(r["verdict"] in bad for rep in reports for r in rep["rows"]) else 0
