"""``minimal.run.speed.blas_kernel_advice``: a note exactly when NumPy's OpenBLAS runs a kernel without AVX-512 on
a CPU that has it, naming the setting that holds it there if one does; ``bench train`` prints it before timing."""
import os
import subprocess
import sys

import pytest

from minimal.run import speed

AVX512 = {"sse2", "avx", "avx2", "fma", "avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"}
AVX2 = {"sse2", "avx", "avx2", "fma"}


def test_an_avx512_cpu_on_the_avx2_kernel_gets_the_note_naming_the_kernel_and_the_setting():
    note = speed.blas_kernel_advice(cpu_flags=AVX512, kernels=["Haswell"], environ={})
    assert note is not None
    assert "Haswell" in note and "OPENBLAS_CORETYPE=SkylakeX" in note and "does not know" in note


def test_a_kernel_forced_by_the_environment_is_named_as_the_cause():
    note = speed.blas_kernel_advice(cpu_flags=AVX512, kernels=["Haswell"], environ={"OPENBLAS_CORETYPE": "Haswell"})
    assert note is not None
    assert "OPENBLAS_CORETYPE=Haswell in the environment" in note and "unset it" in note
    assert "does not know" not in note


@pytest.mark.parametrize("kernel", speed.AVX512_KERNELS + ("skylakex",))
def test_no_note_when_openblas_runs_an_avx512_kernel(kernel):
    assert speed.blas_kernel_advice(cpu_flags=AVX512, kernels=[kernel], environ={}) is None


def test_no_note_on_a_cpu_without_avx512_or_with_only_part_of_it():
    assert speed.blas_kernel_advice(cpu_flags=AVX2, kernels=["Haswell"], environ={}) is None
    # AVX-512 F alone (no BW, DQ, VL): the SkylakeX kernel would not run
    assert speed.blas_kernel_advice(cpu_flags=AVX2 | {"avx512f", "avx512cd"}, kernels=["Haswell"], environ={}) is None


def test_no_note_when_there_is_no_openblas_or_no_cpu_to_read():
    assert speed.blas_kernel_advice(cpu_flags=AVX512, kernels=[], environ={}) is None
    assert speed.blas_kernel_advice(cpu_flags=set(), kernels=["Haswell"], environ={}) is None


def test_one_avx512_kernel_among_several_openblas_libraries_is_enough_to_stay_quiet():
    assert speed.blas_kernel_advice(cpu_flags=AVX512, kernels=["Haswell", "SkylakeX"], environ={}) is None


def test_the_defaults_are_this_process_own_cpu_blas_and_environment():
    flags, kernels = speed._cpu_flags(), speed._openblas_kernels()
    assert speed.blas_kernel_advice() == speed.blas_kernel_advice(cpu_flags=flags or set(), kernels=kernels or [],
                                                                  environ=dict(os.environ))


def test_bench_train_prints_the_note_under_an_avx2_kernel_on_an_avx512_cpu():
    """The note is on stderr before any timing; checked in a process whose OpenBLAS was made to load its Haswell
    kernel (``OPENBLAS_CORETYPE``, read as it loads)."""
    flags = speed._cpu_flags() or set()
    if not all(f in flags for f in speed._SKYLAKEX_FLAGS):
        pytest.skip("this CPU has no AVX-512: the note never speaks here")
    code = ("import sys\n"
            "from minimal.__main__ import main\n"
            "sys.exit(main(['bench', 'train', '--quick', '--no-anchors', '--repeats', '1', '--no-cells', '--only', "
            "'selective copy mingru x2']))\n")
    env = {**os.environ, "OPENBLAS_CORETYPE": "Haswell"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "OPENBLAS_CORETYPE=Haswell in the environment" in out.stderr
    assert "selective copy mingru x2" in out.stdout
