# Sourced by tests/fakenodes/run.sh for each node count: one-sided communication and MPI-IO
# across nodes that share only the file system, with no parameter set by hand.
#   rma.c on 2 ranks, one per node (--map-by node): every peer reached with messages;
#   rma.c on 4 ranks by slot (2 nodes of 2 ranks): windows that mix same-node and
#   other-node peers (4 ranks, not $n: each rank's window has a progress thread, and more
#   ranks than that only add time on a 2-core machine);
#   io.c on $n ranks (shared and ordered pointers, atomic mode, collectives), its files in
#   $work (the nodes share /tmp), which it must leave empty;
#   io_coll.c on $n ranks: collective reads and writes in two phases, one aggregator per
#   node (ranks 0 and $n-2 are the first ranks of the first and last node), also in rounds
#   of cb_buffer_size bytes;
#   rma_fence_epochs.c on 4 ranks by node: fence epochs' updates all applied, also seen
#   by a third rank's get of the next epoch;
#   rma_deadholder.c: a lock holder on another node dies silently.
fn_cc "$root/crates/capi/tests/c/rma.c"
fn_cc "$root/crates/capi/tests/c/io.c"
fn_cc "$root/crates/capi/tests/c/io_coll.c"
fn_mpirun --map-by node -n 2 "$work/rma"
fn_expect "rma.c, 2 ranks on 2 nodes" 0 40 "^rma: all checks passed on 2 ranks\$"
fn_mpirun -n 4 "$work/rma"
fn_expect "rma.c, 4 ranks mixing same-node and other-node peers" 0 60 \
  "^rma: all checks passed on 4 ranks\$"
# Fence epochs across nodes, 4 ranks by node (each window mixes same-node and other-node
# peers): every put and accumulate is applied when the fence returns, and a get of the next
# epoch sees a third rank's update of the epoch before.
fn_cc "$root/crates/capi/tests/c/rma_fence_epochs.c"
fn_mpirun --map-by node -n 4 "$work/rma_fence_epochs" 100
fn_expect "rma_fence_epochs.c, 4 ranks on 2 nodes" 0 40 \
  "^rma_fence_epochs: all checks passed on 4 ranks\$"
mkdir -p "$work/io-data"
fn_mpirun -n $n "$work/io" "$work/io-data"
fn_expect "io.c, $n ranks" 0 40 "^io: done\$"
if [ -n "$(ls -A "$work/io-data")" ]; then
  echo "fakenodes: $nodes nodes: io.c left files behind: $(ls -A "$work/io-data")"
  failures=$((failures + 1))
fi
fn_mpirun -n $n --mca fcoll_base_verbose 10 "$work/io_coll" "$work/io-data"
fn_expect "io_coll.c, $n ranks, an aggregator per node" 0 40 "^io_coll: done\$" \
  "fcoll two_phase: write .*: aggregator 0 of $nodes: " \
  "fcoll two_phase: read .*: aggregator $((n - 2)) of $nodes: "
if [ -n "$(ls -A "$work/io-data")" ]; then
  echo "fakenodes: $nodes nodes: io_coll.c left files behind: $(ls -A "$work/io-data")"
  failures=$((failures + 1))
fi
rm -rf "$work/io-data"
# A passive-target lock holder on another node that dies silently (ULFM on, every window
# peer over messages): the target's progress thread learns of the death from the broken
# link, releases the lock and fails the queued waiter with MPIX_ERR_PROC_FAILED.
fn_cc "$root/crates/capi/tests/c/rma_deadholder.c"
fn_mpirun --with-ft ulfm --mca osc pt2pt --map-by node -n 3 "$work/rma_deadholder"
fn_expect "a lock holder on another node dies: its waiter gets an error" 0 30 \
  "^deadholder: rank 0 ok\$" "^deadholder: rank 2 ok\$"
# Idle ranks on a window whose peers are on other nodes cost no CPU: the target sleeps
# outside MPI while its progress thread serves, the lock holder sleeps holding the lock,
# and a third rank waits 2 s in MPI_Win_lock for it; each must use under 10% of a CPU
# over those 2 s (the progress thread and the waiting origin sleep in the engine's
# blocking wait instead of polling).
fn_cc "$root/crates/capi/tests/c/rma_idle.c"
fn_mpirun --map-by node -n 3 "$work/rma_idle" 2 10
fn_expect "idle ranks of a window across nodes use no CPU" 0 30 \
  "^rma_idle: rank 0 cpu [0-9]+ ms of [0-9]+ ms ok\$" \
  "^rma_idle: rank 1 cpu [0-9]+ ms of [0-9]+ ms ok\$" \
  "^rma_idle: rank 2 cpu [0-9]+ ms of [0-9]+ ms ok\$"
