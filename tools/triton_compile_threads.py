#!/usr/bin/env python3
"""Do Triton compiles overlap when a warmup runs them from threads? (GPU machine)

    python tools/triton_compile_threads.py --variants 6 --json OUT.json

Why: the fixed warmup compiles its variants one after another (docs/fix.md, start-up
cost), so its added start-up is the sum of its compiles. Running the inserted warmup calls
from a thread pool would cost only about the slowest compile if Triton's compiler let the
threads overlap (it drops Python's GIL in its C++ passes and waits on ptxas as a
subprocess), and nothing if it does not. This measures that on a synthetic kernel whose
compile is slow (a long unrolled loop, like vLLM's top-k/top-p kernel): the same N
variants (one per value of a constexpr) compiled serially, then from N threads, then in N
processes, each mode with an empty Triton cache of its own.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def slow_kernel(x_ptr, y_ptr, n, VARIANT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for i in tl.static_range(UNROLL):
        x = tl.load(x_ptr + (offs + i * VARIANT) % n, mask=offs < n, other=0.0)
        acc += tl.where(x > i * 0.01, tl.exp(x * VARIANT) / (1.0 + tl.abs(acc)), tl.sqrt(tl.abs(x) + i))
    tl.store(y_ptr + offs, acc, mask=offs < n)
'''


def _compile(module, variant: int) -> float:
    import torch

    x = torch.randn(1024, device="cuda")
    y = torch.empty_like(x)
    t0 = time.perf_counter()
    module.slow_kernel.warmup(x, y, 1024, VARIANT=variant, BLOCK=1024, grid=(1,))
    return time.perf_counter() - t0


def _load(path: str, unroll: int):
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"slow_{unroll}_{os.getpid()}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _mode(name: str, variants: int, path: str, unroll: int) -> dict:
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix=f"triton-{name}-")
    module = _load(path, unroll)
    t0 = time.perf_counter()
    if name == "serial":
        each = [_compile(module, v) for v in range(1, variants + 1)]
    elif name == "threads":
        with ThreadPoolExecutor(variants) as pool:
            each = list(pool.map(lambda v: _compile(module, v), range(1, variants + 1)))
    else:  # processes: each compiles one variant into its own cache
        procs = [subprocess.Popen([sys.executable, __file__, "--one", str(v), "--path", path,
                                   "--unroll", str(unroll)], stdout=subprocess.PIPE, text=True)
                 for v in range(1, variants + 1)]
        each = [float(p.communicate()[0].strip().splitlines()[-1]) for p in procs]
    return {"mode": name, "wall_s": round(time.perf_counter() - t0, 3),
            "compile_s": [round(s, 3) for s in each]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--variants", type=int, default=6)
    parser.add_argument("--unroll", type=int, default=24)
    parser.add_argument("--json")
    parser.add_argument("--one", type=int)
    parser.add_argument("--path")
    args = parser.parse_args()
    if args.one is not None:
        os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="triton-one-")
        print(_compile(_load(args.path, args.unroll), args.one))
        return
    path = os.path.join(tempfile.mkdtemp(prefix="slowkernel-"), "slow.py")
    with open(path, "w") as f:
        f.write(KERNEL.replace("UNROLL", str(args.unroll)))
    import torch
    import triton

    out = {"triton": triton.__version__, "torch": torch.__version__, "cpus": os.cpu_count(),
           "variants": args.variants, "unroll": args.unroll,
           "modes": []}
    for m in ("serial", "threads", "processes"):
        out["modes"].append(_mode(m, args.variants, path, args.unroll))
        print(json.dumps(out["modes"][-1]), flush=True)
    serial = out["modes"][0]["wall_s"]
    for m in out["modes"]:
        m["speedup_vs_serial"] = round(serial / m["wall_s"], 2) if m["wall_s"] else None
        m["wall_over_slowest"] = round(m["wall_s"] / max(m["compile_s"]), 2)
    text = json.dumps(out, indent=1)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
