# Sourced by up.sh and down.sh: the state directory BASE (OXMPI_SLURM_DIR, default
# /tmp/oxmpi-slurm), checked (absolute, not /, no whitespace: slurm.conf cannot quote it);
# $1 names the script in the error.
BASE=${OXMPI_SLURM_DIR:-/tmp/oxmpi-slurm}
case $BASE in
  /?*) ;;
  *) echo "$1: OXMPI_SLURM_DIR must be an absolute path other than / (got '$BASE')" >&2; exit 1 ;;
esac
case $BASE in
  *[[:space:]]*) echo "$1: OXMPI_SLURM_DIR must not contain whitespace (slurm.conf cannot quote it)" >&2; exit 1 ;;
esac
