#!/usr/bin/env bash
# The second, short GPU check of cuda_kernels (issue 22): v1 at its measured default K, run from the repository
# root on a GPU machine:
#
#     bash bench/gpu_check2.sh            # writes logs and JSON rows to $OUT (default: ./gpu_check_out)
#     GPU_CHECK_TINY=1 bash bench/gpu_check2.sh   # dry run at tiny sizes; without a GPU: NUMBA_ENABLE_CUDASIM=1 GPU_CHECK_TINY=1 ...
#
# Steps, each under its own `timeout`, each allowed to fail without stopping the rest (whole run <= 150 s of wall):
#   0. numpy 2.4 from a wheel in .whl/ (numba-cuda 0.30.4 fails on numpy 2.5, which removed np.row_stack)
#   1. v1 rows at (8, 4096, 8192) and (8, 1024, 8192), float32, preallocated, beside a same-run copy: forward
#      K = 1 and the default K (8), backward K = 1, 4 (the default then) and 8 -> $OUT/v1_rows.jsonl, $OUT/v1.log
#   2. hardware tests: every kernel fits its block (test_cuda_resources), v1/v2 large problems at the new
#      defaults (test_cuda_scan)                                              -> $OUT/tests_fit.log
#   3. with the time left (up to 140 s from the start): v3 large problems (test_cuda_scan_v3, ~130 s on the
#      H200 of 2026-11-26, most of it compilation; skipped when too little is left)  -> $OUT/tests_v3.log
#   4. the table (fraction of copy by K)                                      -> $OUT/v1_table.txt
set -u
NAME=gpu_check2
source "$(dirname "$0")/_gpu_env.sh"   # OUT, say, TINY/TINYARG, numpy 2.4, env.log, PYTEST, helpers
timeout_args 60

# 1. v1 rows
rows_step "step 1: v1 benchmark" 50 gpu_check v1

# 2. the hardware tests the new defaults run through
say "step 2: fit and v1/v2 large-problem tests"
timeout 75 $PYTEST $TIMEOUT_ARGS tests/test_cuda_resources.py tests/test_cuda_scan.py \
  -k "on_the_gpu and (fit or large_problems)" > "$OUT/tests_fit.log" 2>&1
say "step 2 exit $? ($(tail -1 "$OUT/tests_fit.log"))"

# 3. v3 large problems with what is left of 140 s
tests_in_time_left "step 3: v3 large-problem tests" 140 40 tests_v3.log \
  tests/test_cuda_scan_v3.py -k "on_the_gpu and large_problems"

# 4. table
timeout 10 python3 -m minimal.bench.gpu_check v1table "$OUT" > "$OUT/v1_table.txt" 2>&1
cat "$OUT/v1_table.txt"
say "done"
