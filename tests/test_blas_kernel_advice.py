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
    assert "Haswell" in note and "OPENBLAS_CORETYPE=SkylakeX" in note and "may not know" in note


def test_a_kernel_forced_by_the_environment_is_named_as_the_cause():
    note = speed.blas_kernel_advice(cpu_flags=AVX512, kernels=["Haswell"], environ={"OPENBLAS_CORETYPE": "Haswell"})
    assert note is not None
    assert "OPENBLAS_CORETYPE=Haswell in the environment" in note and "unset it" in note
    assert "may not know" not in note


def test_a_coretype_openblas_did_not_take_is_not_blamed():
    # a name OpenBLAS ignores leaves its own choice running: the variable is not the cause
    note = speed.blas_kernel_advice(cpu_flags=AVX512, kernels=["Haswell"], environ={"OPENBLAS_CORETYPE": "Zen9"})
    assert note is not None and "may not know" in note and "Zen9" not in note


def test_a_single_string_is_refused_naming_the_argument():
    with pytest.raises(ValueError, match="kernels"):
        speed.blas_kernel_advice(cpu_flags=AVX512, kernels="Haswell", environ={})
    with pytest.raises(ValueError, match="cpu_flags"):
        speed.blas_kernel_advice(cpu_flags="avx512f avx512bw", kernels=["Haswell"], environ={})


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


def test_the_cpu_flags_are_read_from_the_first_flags_line(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu sse2 avx2 avx512f avx512bw\n"
                    "bugs\t\t: sysret_ss_attrs\n\nprocessor\t: 1\nflags\t\t: fpu\n")
    assert speed._cpu_flags(str(info)) == {"fpu", "sse2", "avx2", "avx512f", "avx512bw"}
    assert speed._cpu_flags(str(tmp_path / "missing")) is None


class _Lib:
    def __init__(self, user_api, internal_api, architecture):
        self.user_api, self.internal_api, self.architecture = user_api, internal_api, architecture


@pytest.mark.parametrize("libs, expected", [
    ([_Lib("blas", "openblas", "Haswell"), _Lib("openmp", "openmp", None)], ("Haswell",)),
    ([_Lib("blas", "openblas", "Haswell"), _Lib("blas", "mkl", None)], None),      # another BLAS beside it
    ([_Lib("blas", "openblas", None)], None),                                       # a kernel it cannot read
    ([_Lib("openmp", "openmp", None)], None),                                       # no BLAS at all
])
def test_the_kernels_are_read_from_threadpoolctl_and_only_for_openblas(monkeypatch, libs, expected):
    import threadpoolctl

    class Controller:
        lib_controllers = libs

    monkeypatch.setattr(threadpoolctl, "ThreadpoolController", Controller)
    assert speed._openblas_kernels() == expected


def test_bench_train_prints_the_note_under_an_avx2_kernel_on_an_avx512_cpu():
    """The note is on stderr before any timing; checked in a process whose OpenBLAS was made to load its Haswell
    kernel (``OPENBLAS_CORETYPE``, read as it loads)."""
    flags = speed._cpu_flags() or set()
    if not all(f in flags for f in speed._SKYLAKEX_FLAGS):
        pytest.skip("this CPU has no AVX-512: the note never speaks here")
    env = {**os.environ, "OPENBLAS_CORETYPE": "Haswell"}
    probe = subprocess.run([sys.executable, "-c", "from minimal.run import speed; print(speed._openblas_kernels())"],
                           capture_output=True, text=True, env=env, timeout=120)
    if probe.stdout.strip() != "('Haswell',)":
        pytest.skip(f"this NumPy's BLAS does not take OPENBLAS_CORETYPE=Haswell (it reports {probe.stdout.strip()})")
    code = ("import sys\n"
            "from minimal.__main__ import main\n"
            "sys.exit(main(['bench', 'train', '--quick', '--no-anchors', '--repeats', '1', '--no-cells', '--only', "
            "'selective copy mingru x2']))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "OPENBLAS_CORETYPE=Haswell in the environment" in out.stderr
    assert "selective copy mingru x2" in out.stdout
