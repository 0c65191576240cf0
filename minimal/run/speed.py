"""Process tuning for training small NumPy models on one CPU core (measured on the project's 2-core machines):
one BLAS thread, and glibc kept from handing large temporaries back to the OS every step.

    from minimal.run import speed
    speed.tune()          # once, at the start of a training run; safe to call again

Both knobs act on the running process (no environment variables needed before NumPy's import) and are no-ops
where the library is not there (no glibc, a BLAS other than NumPy's bundled OpenBLAS). Neither changes a
single computed number: they change only where memory comes from and how many threads one matmul uses.

``blas_kernel_advice()`` changes nothing: it says when NumPy's OpenBLAS runs a kernel without AVX-512 on a CPU
that has it, which only the environment can change before Python starts (``OPENBLAS_CORETYPE``).

A third knob does change numbers, and is not part of ``tune``: ``flush_subnormals()`` sets the calling thread's
x86-64 SSE control register (MXCSR) to flush subnormal results to zero and read subnormal inputs as zero (the FTZ
and DAZ bits), the arithmetic JAX uses on the CPU (``jax.jit(lambda a: a * 1.5)`` of a float32 1e-39 gives 0 on
this machine, NumPy 1.5e-39). A subnormal operand costs a CPU a slow path per operation: a long teacher-student
run, whose pruned neurons come to carry float32 values below 1.2e-38, ran several times slower per step without
the bits (``minimal.reproduce.extra``, which records the step from which a run flushed them).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import re

__all__ = ["tune", "set_blas_threads", "get_blas_threads", "tune_malloc", "flush_subnormals", "subnormals_flushed",
           "AVX512_KERNELS", "blas_kernel_advice"]

# glibc's mallopt parameter numbers (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

_SETTERS = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads", "openblas_set_num_threads")
_GETTERS = ("scipy_openblas_get_num_threads64_", "scipy_openblas_get_num_threads", "openblas_get_num_threads")


def _openblas():
    """The OpenBLAS shared library NumPy has loaded (found in /proc/self/maps), or None."""
    import numpy  # noqa: F401  (loads the library)
    try:
        with open("/proc/self/maps") as f:
            paths = sorted(set(re.findall(r"(/\S*openblas\S*\.so\S*)", f.read())))
    except OSError:
        return None
    for path in paths:
        try:
            return ctypes.CDLL(path)
        except OSError:
            continue
    return None


def _symbol(lib, names):
    for name in names:
        fn = getattr(lib, name, None) if lib is not None else None
        if fn is not None:
            return fn
    return None


def set_blas_threads(n=1):
    """Use ``n`` OpenBLAS threads from now on. Returns True when a setter was found and called."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an int >= 1, got {n!r}")
    fn = _symbol(_openblas(), _SETTERS)
    if fn is None:
        return False
    fn(ctypes.c_int(n))
    return True


def get_blas_threads():
    """OpenBLAS's current thread count, or None where it cannot be read."""
    fn = _symbol(_openblas(), _GETTERS)
    if fn is None:
        return None
    fn.restype = ctypes.c_int
    return int(fn())


def tune_malloc(mmap_threshold=32 << 20, trim_threshold=1 << 30):
    """glibc ``mallopt``: serve allocations below ``mmap_threshold`` bytes from the heap and keep up to
    ``trim_threshold`` bytes of freed heap, so the per-step temporaries are reused instead of mmap'ed, zeroed
    and unmapped every step (fewer page faults: a teacher-student step ran faster with it, timed once).
    Returns True on glibc."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, int(mmap_threshold))) and bool(mallopt(_M_TRIM_THRESHOLD,
                                                                                 int(trim_threshold)))


# OpenBLAS's x86-64 kernels ("cores") that use AVX-512, and the CPU flags its SkylakeX kernel needs
AVX512_KERNELS = ("SkylakeX", "Cooperlake", "SapphireRapids")
_SKYLAKEX_FLAGS = ("avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl")


def _cpu_flags(path="/proc/cpuinfo"):
    """The CPU's feature flags as Linux lists them (the first "flags" line of ``path``), or None elsewhere."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return None


def _openblas_kernels():
    """The kernel of every OpenBLAS loaded (``minimal.products.loaded_openblas``), or None where a BLAS other
    than OpenBLAS is loaded too, or none is, or a kernel cannot be read."""
    from ..products import loaded_openblas

    return tuple(lib.architecture for lib in loaded_openblas()) or None


def blas_kernel_advice(cpu_flags=None, kernels=None, environ=None):
    """A note when NumPy's OpenBLAS runs narrower arithmetic than this CPU has: the CPU has AVX-512 (the flags
    OpenBLAS's SkylakeX kernel needs) and every OpenBLAS loaded runs a kernel without it. OpenBLAS picks its
    kernel ("core") from the CPU when it loads, unless ``OPENBLAS_CORETYPE`` names one: an environment can hold it
    to an older kernel (a machine of this project's, an AMD EPYC of cpu family 26, came with
    ``OPENBLAS_CORETYPE=Haswell`` set, AVX2, where OpenBLAS's own choice is SkylakeX: ``python .ci/blas_core.py``
    with and without the variable), and a CPU model newer than the library gets one too. A step's matrix products
    run at that kernel's rate (``bench/results/train_cpu_2026-12-02_kernel.txt``), so ``bench train`` prints the
    note before it times anything. The fix is in the environment before Python starts: OpenBLAS reads the
    variable once, as it loads. None when there is nothing to say or it cannot tell (not Linux, a BLAS other than
    OpenBLAS).

    ``cpu_flags`` (a collection of /proc/cpuinfo flag names), ``kernels`` (the loaded OpenBLAS kernels' names) and
    ``environ`` (a mapping) default to this process's own; a single string for either collection is a ValueError."""
    import os

    for name, value in (("cpu_flags", cpu_flags), ("kernels", kernels)):
        if isinstance(value, (str, bytes)):
            raise ValueError(f"{name} must be a collection of names, not one string: got {value!r}")
    environ = os.environ if environ is None else environ
    cpu_flags = _cpu_flags() if cpu_flags is None else frozenset(cpu_flags)
    if not cpu_flags or not all(flag in cpu_flags for flag in _SKYLAKEX_FLAGS):
        return None
    kernels = _openblas_kernels() if kernels is None else tuple(kernels)
    if not kernels or any(k.lower() in (a.lower() for a in AVX512_KERNELS) for k in kernels):
        return None
    names = ", ".join(sorted(set(kernels)))
    forced = environ.get("OPENBLAS_CORETYPE", "")
    if forced and forced.lower() in (k.lower() for k in kernels):     # the variable took: it is the cause
        why = (f"OPENBLAS_CORETYPE={forced} in the environment holds it there; unset it (or set "
               f"OPENBLAS_CORETYPE=SkylakeX) before Python starts")
    else:   # nothing set, or a name OpenBLAS did not take: its own choice
        why = "OpenBLAS may not know this CPU model; set OPENBLAS_CORETYPE=SkylakeX before Python starts"
    return (f"note: this CPU has AVX-512, but NumPy's OpenBLAS runs its {names} kernel, without it: {why} for its "
            f"AVX-512 kernel (minimal.run.speed.blas_kernel_advice)")


def tune(blas_threads=1):
    """One BLAS thread and the malloc thresholds above. Returns {"blas": bool, "malloc": bool} (what applied)."""
    return {"blas": set_blas_threads(blas_threads), "malloc": tune_malloc()}


_FTZ_DAZ = 0x8040          # MXCSR bit 15 (flush to zero) and bit 6 (denormals are zero)
_MXCSR_OFFSET = 28         # glibc's x86-64 fenv_t: 28 bytes of x87 state, then the 4-byte MXCSR


def _fenv():
    """(libm, its fegetenv / fesetenv buffer) on x86-64 glibc, else None."""
    import platform

    if platform.machine().lower() not in ("x86_64", "amd64"):
        return None
    try:
        libm = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
        libm.fegetenv, libm.fesetenv    # noqa: B018  (both must exist)
    except (OSError, AttributeError):
        return None
    return libm, (ctypes.c_uint8 * 32)()


def _mxcsr(fenv):
    libm, env = fenv
    if libm.fegetenv(env) != 0:
        raise OSError("fegetenv failed")
    return int.from_bytes(bytes(env[_MXCSR_OFFSET:_MXCSR_OFFSET + 4]), "little")


def subnormals_flushed():
    """Whether this thread flushes subnormals (MXCSR's FTZ and DAZ both set); False where it cannot be read."""
    fenv = _fenv()
    return fenv is not None and _mxcsr(fenv) & _FTZ_DAZ == _FTZ_DAZ


def flush_subnormals(on=True):
    """Set (``on``) or clear the FTZ and DAZ bits of this thread's MXCSR (module docstring): from then on every
    SSE / AVX operation of this thread (NumPy, OpenBLAS with one thread, Numba kernels) gives 0 for a subnormal
    result and reads a subnormal operand as 0. Returns whether the bits are now as asked; False where there is
    no x86-64 glibc (then nothing changed)."""
    fenv = _fenv()
    if fenv is None:
        return False
    libm, env = fenv
    mx = _mxcsr(fenv)
    mx = mx | _FTZ_DAZ if on else mx & ~_FTZ_DAZ
    env[_MXCSR_OFFSET:_MXCSR_OFFSET + 4] = list(mx.to_bytes(4, "little"))
    if libm.fesetenv(env) != 0:
        raise OSError("fesetenv failed")
    return subnormals_flushed() == bool(on)
