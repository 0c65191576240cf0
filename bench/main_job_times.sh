#!/bin/bash
# Per-work times of the main job (`check`, then `reproduce <work> --quick` for each work) on a fresh clone of this
# repository, each step at the highest scheduling priority (nice -n -10: run as root, or drop the nice on a quiet
# machine): wall and CPU time and the load average before/after, appended to $WORK/timing/log.
# Usage: bash bench/main_job_times.sh [steps...]   (default: check zucchet gril minrnn; WORK=/tmp/minimal-times)
set -u
REPO=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
WORK=${WORK:-/tmp/minimal-times}
rm -rf "$WORK" && git clone -q "$REPO" "$WORK" && cd "$WORK" || exit 1
export PYTHONPATH="$WORK" NUMBA_CACHE_DIR="$WORK/.numba_cache" OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
mkdir -p timing; echo "commit $(git rev-parse --short HEAD)" > timing/log
for step in ${@:-check zucchet gril minrnn}; do
  echo "== $step start $(date -u +%T) load: $(cat /proc/loadavg)" >> timing/log
  if [ "$step" = check ]; then cmd="python -m minimal check"; else cmd="python -m minimal reproduce $step --quick --out $WORK/results"; fi
  nice -n -10 /usr/bin/time -f "$step wall %e s user %U s sys %S s maxrss %M KB" -a -o timing/log $cmd > "timing/$step.out" 2>&1
  echo "rc $? ; end $(date -u +%T) load: $(cat /proc/loadavg)" >> timing/log
done
cat timing/log
