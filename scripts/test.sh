#!/usr/bin/env bash
# The project's test command (README): library tests, then every notebook under nbval.
set -euo pipefail
cd "$(dirname "$0")/.."
export NUMBA_ENABLE_CUDASIM=1
python -m pytest -q tests
if compgen -G "notebooks/*.ipynb" > /dev/null; then
  python -m pytest -q --nbval-lax --nbval-current-env notebooks
fi
