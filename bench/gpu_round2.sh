#!/usr/bin/env bash
# GPU round 2 of cuda_kernels (issue 35), run from the repository root on a GPU machine:
#
#     bash bench/gpu_round2.sh            # writes logs and JSON rows to $OUT (default: ./gpu_check_out)
#     GPU_CHECK_TINY=1 bash bench/gpu_round2.sh   # dry run at tiny sizes; without a GPU: NUMBA_ENABLE_CUDASIM=1 GPU_CHECK_TINY=1 ...
#
# Steps, each under its own `timeout`, each allowed to fail without stopping the rest (whole run <= 360 s of wall):
#   0. numpy 2.4 from a wheel in .whl/ (numba-cuda 0.30.4 fails on numpy 2.5, which removed np.row_stack)
#   1. scan rows: the issue's table again (v1 K=8 many channels; v2, v3, v3 look-back and v4 at its
#      (block, K) variants at few and one channel; backward) beside same-run numba and torch copies,
#      torch.cumsum, torch Heinsen, an empty kernel's launch floor           -> $OUT/scan_rows.jsonl, scan.log
#   2. window rows and per-kernel phases (cuda events around every launch of one call) -> window_rows.jsonl
#   3. the table                                                              -> $OUT/table.txt
#   4. hardware tests (-k on_the_gpu) of the kernels this round changed: v4's large problems (real spinning),
#      every kernel fits its block, the window's, with what is left of 350 s  -> $OUT/tests_gpu.log
#      (v1/v2/v3's own hardware tests: tests/test_cuda_scan.py, tests/test_cuda_scan_v3.py)
set -u
NAME=gpu_round2
source "$(dirname "$0")/_gpu_env.sh"   # OUT, say, TINY/TINYARG, numpy 2.4, env.log, PYTEST, helpers
timeout 10 nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv >> "$OUT/env.log" 2>&1
python3 -c "import torch, numba_cuda; print('torch', torch.__version__, 'numba-cuda', numba_cuda.__version__)" \
  >> "$OUT/env.log" 2>&1
timeout_args 120

rows_step "step 1: scan rows" 170 gpu_round2 scan
rows_step "step 2: window rows and phases" 70 gpu_round2 window

timeout 20 python3 -m minimal.bench.gpu_round2 table "$OUT" > "$OUT/table.txt" 2>&1

tests_in_time_left "step 4: hardware tests" 350 30 tests_gpu.log \
  tests/test_cuda_scan_v4.py tests/test_cuda_resources.py tests/test_cuda_window.py -k "on_the_gpu"
cat "$OUT/table.txt"
say "done"
