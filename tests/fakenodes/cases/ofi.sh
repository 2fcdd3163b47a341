# Sourced by tests/fakenodes/run.sh for each node count: the ofi transport across nodes on
# libfabric's software providers that cross a network, tcp (tcp;ofi_rxm) and udp
# (udp;ofi_rxd) (--mca btl self,ofi, FI_PROVIDER passed with -x), while every node also has
# the dummy interface eth1 that reaches nothing (fakenodes_dummy, added for these cases and
# removed after them), which libfabric lists before eth0: each rank must open its endpoint on the interface the tcp transport
# would publish (eth0), not libfabric's first, or every link to another node hangs. rma.c on
# one rank per node (windows over messages: the osc pt2pt path, and puts and gets over
# FI_RMA), io.c on $n ranks; on the first node count only (2 nodes in CI). The third
# software provider, shm, is not run here: it links processes through shared memory, which
# ranks on different fake nodes (their own IPC and mount namespaces) do not share; it is
# tested on one node (crates/capi/tests/tcp.rs, crates/engine/tests/multiproc.rs). Skipped,
# loudly, without libfabric (scripts/deps.sh installs libfabric1 and libfabric-bin).
if [ -n "${fn_ofi_done:-}" ]; then
  :
elif ! command -v fi_info >/dev/null || ! fi_info -p tcp >/dev/null 2>&1; then
  echo "!!! fakenodes: SKIPPED the ofi cases: no libfabric tcp provider (fi_info -p tcp fails;" \
    "scripts/deps.sh installs libfabric-bin)" >&2
else
  fn_ofi_done=1
  fakenodes_dummy 10.99.0 || { echo "fakenodes: cannot add dummy interfaces" >&2; exit 1; }
  [ -x "$work/rma" ] || fn_cc "$root/crates/capi/tests/c/rma.c"
  [ -x "$work/io" ] || fn_cc "$root/crates/capi/tests/c/io.c"
  for prov in tcp udp; do
    full="$prov;ofi_rxm"
    [ "$prov" = udp ] && full="$prov;ofi_rxd"
    fn_mpirun --mca btl self,ofi -x FI_PROVIDER=$prov --mca btl_base_verbose 10 \
      --map-by node -n 2 "$work/rma"
    fn_expect "rma.c over ofi ($full), 2 ranks on 2 nodes, a dummy interface listed first" \
      0 40 "^rma: all checks passed on 2 ranks\$" \
      "provider $full .*interface eth0 ${FN_NET//./\\.}\.[0-9]+/24"
    mkdir -p "$work/io-data"
    fn_mpirun --mca btl self,ofi -x FI_PROVIDER=$prov -n $n "$work/io" "$work/io-data"
    fn_expect "io.c over ofi ($full), $n ranks" 0 40 "^io: done\$"
    rm -rf "$work/io-data"
  done
  fakenodes_dummy_down
fi
