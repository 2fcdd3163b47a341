#!/usr/bin/env bash
# Set up (idempotently) target/venv-mpich: the PyPI `mpich` wheel, whose `mpicc_abi` builds
# MPI-5 standard-ABI programs that crates/capi-abi's tests run on our libmpi_abi.so.1.
# Env: OXMPI_MPICH_WHEEL_VENV (default <repo>/target/venv-mpich), PYTHON (default python3).
set -euo pipefail
MPICH_WHEEL_VERSION=5.0.2
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
VENV=${OXMPI_MPICH_WHEEL_VENV:-$REPO/target/venv-mpich}
if "$VENV/bin/pip" show mpich 2>/dev/null | grep -qx "Version: $MPICH_WHEEL_VERSION" &&
    [ -x "$VENV/bin/mpicc_abi" ]; then
    exit 0
fi
echo "mpich wheel: setting up $VENV (mpich==$MPICH_WHEEL_VERSION)"
"${PYTHON:-python3}" -m venv "$VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check "mpich==$MPICH_WHEEL_VERSION"
[ -x "$VENV/bin/mpicc_abi" ] || { echo "mpich wheel: $VENV/bin/mpicc_abi missing" >&2; exit 1; }
