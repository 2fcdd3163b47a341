# Sourced by tests/fakenodes/run.sh for each node count: the ofi transport across nodes on
# libfabric's software tcp provider (--mca btl self,ofi, FI_PROVIDER=tcp passed with -x),
# while every node also has the dummy interface eth1 that reaches nothing (run.sh's
# fakenodes_dummy), which libfabric lists before eth0: each rank must open its endpoint on
# the interface the tcp transport would publish (eth0), not libfabric's first, or every
# link to another node hangs. rma.c on one rank per node (windows over messages: the
# osc pt2pt path), io.c on $n ranks; on the first node count only (2 nodes in CI). Skipped,
# loudly, without libfabric (scripts/deps.sh installs libfabric1 and libfabric-bin).
if [ -n "${fn_ofi_done:-}" ]; then
  :
elif ! command -v fi_info >/dev/null || ! fi_info -p tcp >/dev/null 2>&1; then
  echo "!!! fakenodes: SKIPPED the ofi cases: no libfabric tcp provider (fi_info -p tcp fails;" \
    "scripts/deps.sh installs libfabric-bin)" >&2
else
  fn_ofi_done=1
  [ -x "$work/rma" ] || fn_cc "$root/crates/capi/tests/c/rma.c"
  [ -x "$work/io" ] || fn_cc "$root/crates/capi/tests/c/io.c"
  fn_mpirun --mca btl self,ofi -x FI_PROVIDER=tcp --mca btl_base_verbose 10 \
    --map-by node -n 2 "$work/rma"
  fn_expect "rma.c over ofi (tcp;ofi_rxm), 2 ranks on 2 nodes, a dummy interface listed first" \
    0 40 "^rma: all checks passed on 2 ranks\$" \
    "provider tcp;ofi_rxm .*interface eth0 ${FN_NET//./\\.}\.[0-9]+/24"
  mkdir -p "$work/io-data"
  fn_mpirun --mca btl self,ofi -x FI_PROVIDER=tcp -n $n "$work/io" "$work/io-data"
  fn_expect "io.c over ofi (tcp;ofi_rxm), $n ranks" 0 40 "^io: done\$"
  rm -rf "$work/io-data"
fi
