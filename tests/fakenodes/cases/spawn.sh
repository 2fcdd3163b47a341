# Sourced by tests/fakenodes/run.sh for each node count: MPI_Comm_spawn across nodes. The
# head places the children by slot on the slots the parents leave free, on every node
# (starting a daemon where none runs yet), the children's output comes back through their
# nodes' daemons, and parents and children talk over tcp between nodes.
fn_cc "$here/c/spawn_where.c"
fn_cc "$root/crates/capi/tests/c/spawn.c"
# One parent per node: the free slots, by slot, are on the first two nodes.
fn_mpirun --map-by node -n "$nodes" "$work/spawn_where" 2 0
fn_expect "spawn: 2 children on the first two nodes' free slots" 0 30 \
  "^child 0 of 2 on n1\$" "^child 1 of 2 on n2\$" "^spawn_where: 2 children from root 0 ok\$"
# The same asked by a parent on the second node.
fn_mpirun --map-by node -n "$nodes" "$work/spawn_where" 2 1
fn_expect "spawn from a rank on the second node" 0 30 \
  "^child 0 of 2 on n1\$" "^child 1 of 2 on n2\$" "^spawn_where: 2 children from root 1 ok\$"
# The C spawn test (exchange, merge, allreduce; spawn_multiple with MPI_APPNUM and wdir;
# errors) from parents on every node.
fn_mpirun --map-by node -n "$nodes" "$work/spawn"
fn_expect "spawn.c from parents on every node" 0 60 \
  "^spawn: 2 children, exchange, merge, allreduce ok\$" \
  "^spawn_multiple: MPI_APPNUM and wdir ok\$" "^spawn errors: missing program and maxprocs 0 ok\$"
# One parent on n1: the second child goes to n2, where no daemon runs yet.
fn_mpirun -n 1 "$work/spawn_where" 2 0
fn_expect "spawn onto a node without a daemon yet" 0 30 \
  "^child 0 of 2 on n1\$" "^child 1 of 2 on n2\$"
# The host info key: the child goes where it is asked to; an unknown host is named.
fn_mpirun -n 2 "$work/spawn_where" 1 0 "host=n$nodes"
fn_expect "spawn with the host info key" 0 30 "^child 0 of 1 on n$nodes\$"
fn_mpirun -n 2 "$work/spawn_where" 1 0 host=nowhere
fn_expect "spawn onto an unknown host: MPI_ERR_SPAWN naming it" "[1-9][0-9]*" 30 \
  "MPI_ERR_SPAWN.*host 'nowhere' is not in the job's allocation"
# add-host: a node outside the allocation (--host n1:2 only) joins it for the children.
t0=$(date +%s%N)
timeout -k 5 120 "$P/bin/mpirun" --host n1:2 --mca plm_rsh_agent "$FN_DIR/agent" -n 1 \
  "$work/spawn_where" 2 0 "add-host=n$nodes:2" >"$work/out" 2>"$work/err" </dev/null &
bg=$!
fn_finish
fn_expect "spawn with add-host onto a node outside the allocation" 0 30 \
  "^child 0 of 2 on n$nodes\$" "^child 1 of 2 on n$nodes\$"
# mpi4py.futures: MPIPoolExecutor spawns its 2 workers, on n1 and n2 (if the mpi4py venv of
# tests/clients exists).
venv=${OXMPI_MPI4PY_VENV:-$root/target/venv-mpi4py}
if "$venv/bin/python" -c 'import mpi4py.futures' 2>/dev/null; then
  fn_mpirun -n 1 "$venv/bin/python" -m mpi4py.futures "$root/tests/clients/mpi4py_pool.py"
  fn_expect "mpi4py.futures MPIPoolExecutor across nodes" 0 60 "^mpi4py.futures pool ok: 225\$"
else
  echo "!!! fakenodes: mpi4py.futures across nodes SKIPPED: no mpi4py in $venv (tests/clients/mpi4py.sh sets it up)" >&2
fi
