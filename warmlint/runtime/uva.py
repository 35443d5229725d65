"""A stand-in for vLLM's compiled ``torch.ops._C.get_cuda_view_from_cpu_tensor``.

The v2 model runner keeps its per-request sampling state in pinned host buffers that the
GPU reads through unified virtual addressing (``vllm/v1/worker/gpu/buffer_utils.py``
``UvaBuffer``: ``get_accelerator_view_from_cpu_tensor(cpu)``). vLLM gets that view from
its compiled ``_C`` extension, which the GPU bundle cannot carry. The view needs no
compiled code: under UVA a pinned host pointer is a valid device pointer, so a CUDA
tensor can alias it through ``__cuda_array_interface__`` (zero-copy, like the real op;
checked on the lent H200 with CuPy, shared/gpu-notes.md). Writes the sampler makes to the
CPU side (``copy_to_uva``) are then seen by its kernels exactly as in vLLM.

``install`` patches the name where ``buffer_utils`` imported it (and in
``vllm.utils.torch_utils``), and says what it did; nothing else of vLLM is replaced.
On a CPU dry run (no CUDA) the "view" is the host tensor itself, ``UvaBuffer`` gets an
unpinned buffer and staging copies are not pinned: enough to exercise the harness (with
``TRITON_INTERPRET=1 CUDA_VISIBLE_DEVICES=`` the kernels even run, in Triton's
interpreter), meaningless for verdicts.
"""

from __future__ import annotations

import importlib

_TARGETS = ("vllm.v1.worker.gpu.buffer_utils", "vllm.utils.torch_utils")
NAME = "get_accelerator_view_from_cpu_tensor"


class _CudaArrayInterface:
    """The minimal object ``torch.as_tensor(..., device="cuda")`` accepts: bytes at a
    device-visible address, kept alive through ``owner`` (the pinned host tensor)."""

    def __init__(self, ptr: int, nbytes: int, owner) -> None:
        self.owner = owner
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1",
                                         "data": (ptr, False), "version": 3, "strides": None}


def _byte_alias(cpu_tensor, how: str):
    """A uint8 CUDA tensor over the pinned tensor's bytes (CuPy, or the bare interface)."""
    import torch

    nbytes = cpu_tensor.untyped_storage().nbytes()
    ptr = cpu_tensor.untyped_storage().data_ptr()
    if how == "cupy":
        import cupy

        memory = cupy.cuda.UnownedMemory(ptr, nbytes, cpu_tensor, 0)
        array = cupy.ndarray((nbytes,), dtype=cupy.uint8,
                             memptr=cupy.cuda.MemoryPointer(memory, 0))
    else:
        array = _CudaArrayInterface(ptr, nbytes, cpu_tensor)
    return torch.as_tensor(array, device="cuda")


def cuda_view(cpu_tensor, how: str | None = None):
    """A CUDA tensor that aliases a pinned CPU tensor (same shape, dtype, strides)."""
    if not cpu_tensor.is_pinned():
        raise ValueError("the UVA stand-in needs a pinned CPU tensor (as vLLM's op does)")
    how = how or backend()
    raw = _byte_alias(cpu_tensor, how)
    typed = raw.view(cpu_tensor.dtype)  # the whole storage, in the tensor's dtype
    return typed.as_strided(cpu_tensor.shape, cpu_tensor.stride(),
                            cpu_tensor.storage_offset())


def backend() -> str:
    """``cupy`` where installed (the path checked on the H200), else ``interface``."""
    try:
        importlib.import_module("cupy")
        return "cupy"
    except Exception:  # noqa: BLE001 - a broken CuPy is as good as none here
        return "interface"


def install(device_type: str = "cuda") -> dict:
    """Patch vLLM's UVA view where it is looked up; returns what was patched, for the JSON."""
    info = {"patched": [], "backend": None, "dry_run": device_type != "cuda"}
    if device_type == "cuda":
        how = backend()
        info["backend"] = how

        def view(cpu_tensor):
            return cuda_view(cpu_tensor, how)
    else:
        def view(cpu_tensor):
            return cpu_tensor

    view.__name__ = view.__qualname__ = f"warmlint_{NAME}"
    for module_name in _TARGETS:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if hasattr(module, NAME):
            setattr(module, NAME, view)
            info["patched"].append(f"{module_name}.{NAME}")
    if device_type != "cuda":
        info["patched"] += _dry_run_patches()
    return info


def _dry_run_patches() -> list[str]:
    """CPU dry run only: pinned memory needs CUDA, so ``UvaBuffer`` gets a plain buffer;
    the platform (no CUDA: "unspecified") gets a number of compute units for Triton grids."""
    import torch

    module = importlib.import_module("vllm.v1.worker.gpu.buffer_utils")

    class DryRunUvaBuffer:
        def __init__(self, size, dtype) -> None:
            self.cpu = torch.zeros(size, dtype=dtype, device="cpu")
            self.np = self.cpu.numpy()
            self.uva = self.cpu

    module.UvaBuffer = DryRunUvaBuffer
    torch_utils = importlib.import_module("vllm.utils.torch_utils")
    torch_utils.PIN_MEMORY = False  # read by async_tensor_h2d at each call
    from vllm.platforms import current_platform

    current_platform.num_compute_units = lambda device_id=0: 4
    return ["vllm.v1.worker.gpu.buffer_utils.UvaBuffer (dry run)",
            "vllm.utils.torch_utils.PIN_MEMORY=False (dry run)",
            "current_platform.num_compute_units=4 (dry run)"]
