#!/bin/bash
# Times of the README's main job as a newcomer runs it, on a fresh clone of this repository: a new virtual
# environment, `pip install -e .`, then `check` and `reproduce <work> --quick` for each work, each step under
# `/usr/bin/time -v` (wall, user and system CPU seconds, peak memory) with the load average before and after, the
# Numba cache empty at the start. The summary rows go to $WORK/timing/log (printed at the end); each step's full
# `time -v` report and output stay in $WORK/timing/. CPU seconds (user + system) are the figure to quote when other
# work loads the machine: wall time then mostly measures the load.
# Usage: bash bench/main_job_times.sh [steps...]   (default: install check zucchet gril minrnn)
#   WORK=/tmp/minimal-times (removed and re-cloned); PYTHON=python3 (makes the venv);
#   NICE="nice -n -10" to run the steps at a higher priority (as root), empty (default) to run as a newcomer does.
set -u
REPO=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
WORK=${WORK:-/tmp/minimal-times}
PYTHON=${PYTHON:-python3}
NICE=${NICE:-}
rm -rf "$WORK" && git clone -q "$REPO" "$WORK" && cd "$WORK" || exit 1
CORES=$(getconf _NPROCESSORS_ONLN)    # not nproc: it obeys OMP_NUM_THREADS
export NUMBA_CACHE_DIR="$WORK/.numba_cache" OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
unset PYTHONPATH VIRTUAL_ENV
mkdir -p timing
echo "commit $(git rev-parse --short HEAD) $(date -u +%F) $CORES cores, $($PYTHON --version 2>&1)" > timing/log
for step in ${@:-install check zucchet gril minrnn}; do
  case $step in
    install) [ -x .venv/bin/python ] || $PYTHON -m venv .venv || exit 1; cmd=".venv/bin/python -m pip install -q -e ." ;;
    check) cmd=".venv/bin/python -m minimal check" ;;
    *) cmd=".venv/bin/python -m minimal reproduce $step --quick --out $WORK/results" ;;
  esac
  before=$(cut -d' ' -f1-3 /proc/loadavg)
  $NICE /usr/bin/time -v -o "timing/$step.time" $cmd > "timing/$step.out" 2>&1
  rc=$?
  after=$(cut -d' ' -f1-3 /proc/loadavg)
  get() { grep -F "$1" "timing/$step.time" | sed 's/.*: //'; }
  wall=$(get "Elapsed (wall clock)" | awk -F: '{s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; printf "%.2f", s}')
  user=$(get "User time (seconds)"); sys=$(get "System time (seconds)")
  cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN {printf "%.2f", u + s}')
  echo "$step: rc $rc, cpu $cpu s (user $user s + sys $sys s), wall $wall s, maxrss $(get "Maximum resident") KB;" \
       "load before $before, after $after; $cmd" >> timing/log
done
cat timing/log
