"""What a CPU run's speed rests on beyond its shapes, for trace metadata: the processor, and the
BLAS kernels PyTorch's matrix products run. OpenBLAS picks its kernels by the CPU it detects and
falls back to old ones on a CPU newer than itself: on a 2-core Xeon VM (family 6, model 207)
OpenBLAS 0.3.21 chose its Prescott kernels, a third of the AVX-512 ones' speed, so two runs of one
command on two such VMs need not be of one machine. ``ddptrain`` writes the same two lines."""

from __future__ import annotations

import ctypes
import os


def _cpuinfo() -> dict:
    """The first processor's "key: value" lines of /proc/cpuinfo ({} where there is none)."""
    found = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, colon, value = line.partition(":")
                if colon and key.strip() not in found:
                    found[key.strip()] = value.strip()
    except OSError:
        pass
    return found


def cpu_model() -> str:
    """"Intel(R) Xeon(R) Processor (family 6, model 207)", or "unknown"."""
    info = _cpuinfo()
    name = info.get("model name")
    if not name:
        return "unknown"
    if "cpu family" in info and "model" in info:
        return f"{name} (family {info['cpu family']}, model {info['model']})"
    return name


def blas_kernels() -> str:
    """"OpenBLAS 0.3.21, Prescott kernels" (", set by OPENBLAS_CORETYPE" when that chose them), or
    "MKL" for a PyTorch built with it, or "not OpenBLAS": asked of the OpenBLAS this process has
    loaded (PyTorch's, once imported)."""
    import torch

    if torch.backends.mkl.is_available():
        return "MKL"
    try:
        with open("/proc/self/maps", encoding="utf-8") as f:
            libraries = sorted({line.split()[-1] for line in f if "blas" in line.rsplit("/", 1)[-1]})
    except OSError:
        libraries = []
    for path in libraries:
        try:
            lib = ctypes.CDLL(path)
            config, core = lib.openblas_get_config, lib.openblas_get_corename
        except (OSError, AttributeError):
            continue
        config.restype = core.restype = ctypes.c_char_p
        name, version = (config().decode(errors="replace").split() + ["", ""])[:2]
        forced = ", set by OPENBLAS_CORETYPE" if os.environ.get("OPENBLAS_CORETYPE") else ""
        return f"{name} {version}, {core().decode(errors='replace')} kernels{forced}"
    return "not OpenBLAS"


_KEPT = "freed memory kept (mmap threshold 32 MiB, trim threshold 1 GiB, top pad 256 MiB)"
_kept = False


def keep_freed_memory() -> bool:
    """Has glibc's malloc keep freed memory for reuse, as ddptrain does and CUDA's caching
    allocator does on GPUs; call it first thing in each rank. By default glibc gives large freed
    blocks back to the kernel and faults fresh pages in on their next use; batch shapes change
    every step, and the pages come back at each step's cost: kept, a small decoder's backward and
    optimizer ran a fifth to a quarter faster on a 2-core Xeon, profile and training alike
    (traces/cpu/prereg32 against prereg30).
    False where the C library is not glibc (nothing changed)."""
    global _kept
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3  # glibc's malloc.h
    _kept = all(mallopt(option, value) == 1 for option, value in
                ((M_MMAP_THRESHOLD, 32 << 20), (M_TRIM_THRESHOLD, 1 << 30), (M_TOP_PAD, 256 << 20)))
    return _kept


def malloc_setting() -> str:
    """The trace's ``malloc`` line: whether freed memory is kept (keep_freed_memory) or glibc's
    defaults give it back."""
    if _kept:
        return _KEPT
    if "malloc" in os.environ.get("GLIBC_TUNABLES", ""):
        return "set by GLIBC_TUNABLES: " + os.environ["GLIBC_TUNABLES"]
    return "glibc's defaults (freed memory given back, its pages faulted in again on the next step)"
