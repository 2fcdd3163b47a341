# Sourced by tests/fakenodes/run.sh for each node count: ULFM across nodes. ulfm.c on 4
# ranks spread by node (the killed last rank has survivors on its own node and on
# another): mpirun --with-ft ulfm reports the death and goes on; the survivors see it
# (pidfd on the node, the broken TCP link elsewhere), revoke, agree, shrink and reduce.
fn_cc "$root/crates/capi/tests/c/ulfm.c"
fn_mpirun --with-ft ulfm --map-by node -n 4 "$work/ulfm"
fn_expect "ULFM: a rank killed, the survivors revoke, shrink and reduce" 0 30 \
  "^ulfm: rank 0 ok\$" "^ulfm: rank 1 ok\$" "^ulfm: rank 2 ok\$" \
  "rank 3 .*signal 9.*the job continues"
