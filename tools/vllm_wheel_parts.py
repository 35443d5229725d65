#!/usr/bin/env python3
"""A complete vLLM wheel, cut into parts the GPU machine can receive one call at a time.

    python tools/vllm_wheel_parts.py --wheel vllm-0.26.0-cp38-abi3-manylinux_2_28_x86_64.whl \\
        --out .vllm-parts

A device call carries 64 MiB, the working tree included; vLLM 0.26.0's wheel is 304 MB.
This unpacks it, leaves out what importing vLLM and its model runners never loads, packs
the rest as one tar.xz and splits it into equal parts under ``--part-mib`` each, with
``SHA256SUMS`` (tools/run_gpu_plugin_real.sh checks them before unpacking) and
``LEFT_OUT.txt``. Left out (``LEAVE_OUT``): the FlashAttention-2 extension (vLLM loads
FA2 or FA3, whichever is there: ``vllm_flash_attn/flash_attn_interface.py`` imports each
inside ``try``; FA3 is the Hopper one and is kept), the ``vllm-rs`` front-end binary, and
the C++/CUDA sources and headers under ``third_party/`` (read only by kernels JIT-built at
run time). Every Python file and every other compiled extension travels unchanged.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

LEAVE_OUT = ("vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so", "vllm/vllm-rs")
SOURCES = (".h", ".hpp", ".cuh", ".cu", ".inl", ".hxx", ".cpp", ".cc", ".c")


def _kept(name: str) -> bool:
    if name in LEAVE_OUT:
        return False
    return not (name.startswith("vllm/third_party/") and name.endswith(SOURCES))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--wheel", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--part-mib", type=int, default=56)
    args = parser.parse_args()
    if not args.wheel.is_file():
        print(f"vllm_wheel_parts: no such wheel: {args.wheel}", file=sys.stderr)
        return 2
    with zipfile.ZipFile(args.wheel) as whl, tempfile.TemporaryDirectory() as tmp:
        names = whl.namelist()
        kept = [n for n in names if _kept(n)]
        left = sorted(set(names) - set(kept))
        whl.extractall(tmp, kept)
        top = sorted({n.split("/")[0] for n in kept})
        archive = Path(tmp) / "vllm.tar.xz"
        with archive.open("wb") as out:
            tar = subprocess.Popen(["tar", "-cf", "-", "-C", tmp, *top], stdout=subprocess.PIPE)
            subprocess.run(["xz", "-T0", "-6"], stdin=tar.stdout, stdout=out, check=True)
            if tar.wait():
                print("vllm_wheel_parts: tar failed", file=sys.stderr)
                return 1
        size, limit = archive.stat().st_size, args.part_mib << 20
        count = -(-size // limit)
        each = -(-size // count)
        shutil.rmtree(args.out, ignore_errors=True)
        args.out.mkdir(parents=True)
        sums = []
        with archive.open("rb") as src:
            for i in range(count):
                data = src.read(each)
                name = f"part-{i:02d}"
                (args.out / name).write_bytes(data)
                sums.append(f"{hashlib.sha256(data).hexdigest()}  {name}\n")
    (args.out / "SHA256SUMS").write_text("".join(sums))
    (args.out / "LEFT_OUT.txt").write_text(
        f"from {args.wheel.name}, left out:\n" + "".join(f"{n}\n" for n in left))
    print(f"{args.wheel.name}: {len(kept)} of {len(names)} files kept, {size / 2**20:.1f} MiB "
          f"packed in {count} parts of {each / 2**20:.1f} MiB under {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
