#!/usr/bin/env bash
# Install what building and testing oxmpi needs on a fresh Debian machine.
# Idempotent and quick when everything is present. Needs root (or sudo) only
# when a Debian package is missing.
set -euo pipefail

apt_pkgs=(
  gcc g++ make pkg-config
  # Peers: the MPICH-ABI interop tests and the benchmark harness build with them.
  mpich libmpich-dev openmpi-bin libopenmpi-dev
  # bindgen (rsmpi's mpi-sys, tests/clients/rsmpi.sh) needs libclang.
  libclang-dev
)
missing=()
for p in "${apt_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Rust components used by the test command.
if command -v rustup >/dev/null 2>&1; then
  rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt
  rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy
fi
echo "deps: ok"
