# Sourced by tests/fakenodes/run.sh for each node count: the unmodified mpi4py wheel across
# nodes, through mpi4py's own test modules for MPI-IO and one-sided communication (the
# parts that reach other nodes with messages), one rank per node (--map-by node), on the
# first node count only (2 nodes in CI). The accumulate tests of test_rma are left out
# (-x Accumulate): they pass across nodes but take minutes there (osc pt2pt over tcp, see
# the notes). FN_MPI4PY_MODULES chooses other modules, FN_MPI4PY_SKIP other
# exclusions (-x substrings); the venv and the sdist's tests come from
# tests/clients/mpi4py-env.sh (cargo xtask test's mpi4py step made them).
if [ -z "${fn_mpi4py_done:-}" ]; then
  fn_mpi4py_done=1
  . "$root/tests/clients/mpi4py-env.sh" "$P"
  fn_mpi4py_tests=$(mpi4py_sdist_tests) || exit 2
  fn_mpi4py_skip=()
  for x in ${FN_MPI4PY_SKIP-Accumulate}; do fn_mpi4py_skip+=(-x "$x"); done
  for m in ${FN_MPI4PY_MODULES:-file rma}; do
    fn_mpirun --map-by node -n "$nodes" "$PY" "$fn_mpi4py_tests/main.py" -q \
      -i "^test_$m\.py\$" "${fn_mpi4py_skip[@]}"
    fn_expect "mpi4py test_$m, one rank per node" 0 110 "^OK( \(|\$)"
  done
fi
