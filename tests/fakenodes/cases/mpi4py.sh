# Sourced by tests/fakenodes/run.sh for each node count: the unmodified mpi4py wheel across
# nodes, through mpi4py's own test modules for MPI-IO, windows and one-sided communication
# (test_file, test_win, test_rma: all 26 of its tests, accumulates included, about 7 s on a
# debug build), one rank per node (--map-by node), on the first node count only (2 nodes in
# CI). FN_MPI4PY_MODULES picks other modules, FN_MPI4PY_SKIP (-x substrings) leaves tests
# out. The venv and the sdist's tests come from tests/clients/mpi4py-env.sh (cargo xtask
# test's mpi4py step made them).
if [ -z "${fn_mpi4py_done:-}" ]; then
  fn_mpi4py_done=1
  . "$root/tests/clients/mpi4py-env.sh" "$P"
  fn_mpi4py_tests=$(mpi4py_sdist_tests) || exit 2
  fn_mpi4py_skip=()
  for x in ${FN_MPI4PY_SKIP-}; do fn_mpi4py_skip+=(-x "$x"); done
  for m in ${FN_MPI4PY_MODULES:-file win rma}; do
    fn_mpirun --map-by node -n "$nodes" "$PY" "$fn_mpi4py_tests/main.py" -q \
      -i "^test_$m\.py\$" "${fn_mpi4py_skip[@]}"
    fn_expect "mpi4py test_$m, one rank per node" 0 110 "^OK( \(|\$)"
  done
fi
