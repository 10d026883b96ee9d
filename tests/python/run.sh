#!/usr/bin/env bash
# The Python package's tests (python/tests, pytest) on the source tree, over the build's
# libqmm.so. The interpreter is $PYTHON (.ci/run's venv, which has numpy and pytest pinned) or
# python3; without numpy/pytest the test skips (77), in CI (CI=true) it fails.
# Usage: run.sh <libqmm.so>
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
py=${PYTHON:-python3}
if ! "$py" -c 'import numpy, pytest' 2>/dev/null; then
    msg="python: $py lacks numpy or pytest (bash .ci/run installs them)"
    if [ "${CI:-}" = true ]; then echo "FAIL: $msg"; exit 1; fi
    echo "SKIP: $msg"; exit 77
fi
export QMM_LIBRARY=$1 PYTHONPATH=$src/python${PYTHONPATH:+:$PYTHONPATH}
exec "$py" -m pytest -q -p no:cacheprovider "$src/python/tests"
