# Sourced by tests/fakenodes/run.sh for each node count: ULFM across nodes. ulfm.c on 4
# ranks spread by node (the killed last rank has survivors on its own node and on
# another): mpirun --with-ft ulfm reports the death and goes on; the survivors see it
# (pidfd on the node, the broken TCP link elsewhere), revoke, agree, shrink and reduce.
fn_cc "$root/crates/capi/tests/c/ulfm.c"
fn_mpirun --with-ft ulfm --map-by node -n 4 "$work/ulfm"
fn_expect "ULFM: a rank killed, the survivors revoke, shrink and reduce" 0 30 \
  "^ulfm: rank 0 ok\$" "^ulfm: rank 1 ok\$" "^ulfm: rank 2 ok\$" \
  "rank 3 .*signal 9.*the job continues"
# A revoker that dies at once (tests/fakenodes/c/revoke_die.c): rank 0 (node 1) revokes the
# world and kills itself right after MPIX_Comm_revoke returns; every survivor, on its node
# and on the others, still gets MPIX_ERR_REVOKED in a receive only the revoke ends, then
# shrinks and sums.
fn_cc "$here/c/revoke_die.c"
fn_mpirun --with-ft ulfm --map-by node -n $n "$work/revoke_die"
want=()
for r in $(seq 1 $((n - 1))); do want+=("^revoke_die: rank $r ok\$"); done
fn_expect "ULFM: a revoker that dies at once, every survivor sees the revoke" 0 30 \
  "${want[@]}" "rank 0 .*signal 9.*the job continues"
# ULFM over the ofi transport across nodes (libfabric's software tcp provider, first node
# count only): the killed rank's link breaks at the provider, the survivors on other
# nodes get the failure from it, then revoke, agree, shrink and reduce as over tcp.
# Skipped, loudly, without libfabric (scripts/deps.sh installs libfabric1 and libfabric-bin).
if [ -n "${fn_ulfm_ofi_done:-}" ]; then
  :
elif ! command -v fi_info >/dev/null || ! fi_info -p tcp >/dev/null 2>&1; then
  echo "!!! fakenodes: SKIPPED ULFM over ofi: no libfabric tcp provider (fi_info -p tcp fails;" \
    "scripts/deps.sh installs libfabric-bin)" >&2
else
  fn_ulfm_ofi_done=1
  fn_mpirun --with-ft ulfm --mca btl self,ofi -x FI_PROVIDER=tcp --map-by node -n 4 "$work/ulfm"
  fn_expect "ULFM over ofi (tcp;ofi_rxm) across nodes: the survivors shrink and reduce" 0 30 \
    "^ulfm: rank 0 ok\$" "^ulfm: rank 1 ok\$" "^ulfm: rank 2 ok\$" \
    "rank 3 .*signal 9.*the job continues"
fi
