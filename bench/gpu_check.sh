#!/usr/bin/env bash
# The prepared GPU check of cuda_kernels (issue 22), run from the repository root on a GPU machine:
#
#     bash bench/gpu_check.sh            # writes logs and JSON rows to $OUT (default: ./gpu_check_out)
#     GPU_CHECK_TINY=1 bash bench/gpu_check.sh   # dry run at tiny sizes; without a GPU: NUMBA_ENABLE_CUDASIM=1 GPU_CHECK_TINY=1 ...
#
# Steps, each under its own `timeout` and each allowed to fail without stopping the rest (whole run <= 460 s
# of wall on an H200, most of it JIT compilation):
#   0. numpy 2.4 from a wheel in .whl/ (numba-cuda 0.30.4 fails on numpy 2.5, which removed np.row_stack)
#   1. hardware tests: every kernel fits its largest block (test_cuda_resources) and v3 at block 1024 in float32
#      and float64 (the shapes that failed with CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)      -> $OUT/tests_launch.log
#   2. scan rows (python -m minimal.bench.gpu_check scan)                               -> $OUT/scan_rows.jsonl
#   3. window rows, f = 10, 16, 32 and B = 1                                             -> $OUT/window_rows.jsonl
#   4. the remaining hardware tests of the touched files (window, v1/v2 large, look-back) -> $OUT/tests_rest.log
#   5. the tables (issue 22's, allocating and preallocated; v1 by K; window)              -> $OUT/tables.txt
set -u
NAME=gpu_check
source "$(dirname "$0")/_gpu_env.sh"   # OUT, say, TINY/TINYARG, numpy 2.4, env.log, PYTEST, helpers
timeout_args 120   # the first v3 test compiled for 56 s on the H200

# 1. the launches that failed
say "step 1: launch tests"
timeout 170 $PYTEST $TIMEOUT_ARGS tests/test_cuda_resources.py tests/test_cuda_scan_v3.py \
  -k "on_the_gpu and (fit or both_warp_paths)" > "$OUT/tests_launch.log" 2>&1
say "step 1 exit $? ($(tail -1 "$OUT/tests_launch.log"))"

# 2. scan rows
rows_step "step 2: scan benchmark" 160 gpu_check scan

# 3. window rows
rows_step "step 3: window benchmark" 70 gpu_check window

# 4. the other hardware tests of the files this branch touched
tests_in_time_left "step 4: remaining hardware tests" 400 30 tests_rest.log \
  tests/test_cuda_window.py tests/test_cuda_scan.py tests/test_cuda_scan_v3.py \
  -k "on_the_gpu and not both_warp_paths and not benchmark and not shuffle_path_small"

# 5. tables
timeout 20 python3 -m minimal.bench.gpu_check table "$OUT" > "$OUT/tables.txt" 2>&1
cat "$OUT/tables.txt"
say "done"
