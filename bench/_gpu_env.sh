# Sourced by bench/gpu_check.sh, bench/gpu_check2.sh and bench/gpu_round2.sh (set NAME first): $OUT, a timed
# `say` logging to $OUT/steps.log, $TINY / $TINYARG for a simulator dry run, numpy 2.4 from a wheel in .whl/
# first on the path (numba-cuda 0.30.4 fails on numpy 2.5, which removed np.row_stack; skipped when there is no
# wheel), the environment written to $OUT/env.log, $PYTEST, `timeout_args`, `rows_step` and `tests_in_time_left`.
OUT=${OUT:-$PWD/gpu_check_out}
mkdir -p "$OUT"
START=$(date +%s)
say() { echo "[$NAME $(( $(date +%s) - START )) s] $*" | tee -a "$OUT/steps.log"; }
TINY=${GPU_CHECK_TINY:-}
TINYARG=${TINY:+--tiny}

if ls .whl/*.whl >/dev/null 2>&1; then
  timeout 60 python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl \
    > "$OUT/pip.log" 2>&1 || say "numpy wheel install FAILED (see pip.log)"
  export PYTHONPATH=/tmp/site:$PWD:$PWD/tests
else
  say "no .whl/*.whl: using the installed numpy"
  export PYTHONPATH=$PWD:$PWD/tests
fi
if [ -z "$TINY" ]; then export NUMBA_ENABLE_CUDASIM=0; fi
timeout 60 python3 -c "import numpy, numba, numba.cuda as c; print('numpy', numpy.__version__, 'numba', numba.__version__, \
'simulator', numba.config.ENABLE_CUDASIM); c.detect()" > "$OUT/env.log" 2>&1
timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >> "$OUT/env.log" 2>&1
say "$(head -1 "$OUT/env.log")"

PYTEST="python3 -m pytest -p no:cacheprovider -v -rA --durations=10"   # -v: one line per test as it ends

# timeout_args SECONDS: sets $TIMEOUT_ARGS, pytest-timeout's limit per test (empty where pytest-timeout is missing).
timeout_args() {
  TIMEOUT_ARGS="--timeout $1 --timeout-method=thread"
  python3 -c "import pytest_timeout" 2>/dev/null || TIMEOUT_ARGS=""
}

# rows_step "step N: what" SECONDS MODULE COMMAND: `python3 -m minimal.bench.MODULE COMMAND $OUT $TINYARG` under
# `timeout SECONDS`, logged to $OUT/COMMAND.log; then its exit status and the rows in $OUT/COMMAND_rows.jsonl.
rows_step() {
  local label=$1 secs=$2 module=$3 what=$4
  say "$label"
  timeout "$secs" python3 -m "minimal.bench.$module" "$what" "$OUT" $TINYARG > "$OUT/$what.log" 2>&1
  say "${label%%:*} exit $? ($(grep -c . "$OUT/${what}_rows.jsonl" 2>/dev/null || echo 0) rows)"
}

# tests_in_time_left "step N: what" BUDGET MIN LOG [pytest arguments...]: the tests under what is left of BUDGET
# seconds since the start (skipped, saying so, when MIN seconds or fewer are left), logged to $OUT/LOG, with the
# script's $TIMEOUT_ARGS.
tests_in_time_left() {
  local label=$1 budget=$2 min=$3 log=$4
  shift 4
  local left=$(( budget - ($(date +%s) - START) ))
  if [ "$left" -gt "$min" ]; then
    say "$label (${left} s)"
    timeout "$left" $PYTEST $TIMEOUT_ARGS "$@" > "$OUT/$log" 2>&1
    say "${label%%:*} exit $? ($(tail -1 "$OUT/$log"))"
  else
    say "${label%%:*} skipped: ${left} s left"
  fi
}
