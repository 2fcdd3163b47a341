# Sourced: fake nodes on one machine that share nothing with each other but the file system.
# Each node is a network namespace (own IP on a bridge, unresolvable host name) and every
# command started on it runs in fresh PID, IPC, UTS and mount namespaces (private /dev/shm),
# so /proc/<pid>, memfd and cross-memory-attach shortcuts between nodes fail as between real
# machines; processes of one node still share them, like the ranks of a real node.
#
#   fakenodes_up N   -> nodes n1..nN at $FN_NET.11.., $FN_DIR/{agent,hosts}
#   fakenodes_dummy NET -> a second interface on every node, on NET.0/24, that reaches nothing
#                       (fakenodes_dummy_down removes it)
#   fakenodes_second NET -> another working network: eth2 on every node at NET.(10+I)/24 on
#                       a second bridge (fakenodes_second_down removes it)
#   fakenodes_second_src NET -> its route prefers eth0's address as the source
#   fakenodes_cut I  -> removes node I's link (a partition: its packets vanish)
#   fakenodes_down   -> kills what runs on the nodes, removes namespaces, links, $FN_DIR
#   fakenodes_peers DIR PPN -> PPN slots per node, and for MPICH and Open MPI (bench/):
#                       DIR/hosts.hydra and DIR/agent-sh (the agent taking one command line)
#
# Needs root, iproute2 (`ip`) and util-linux (`unshare`). FN_TAG (default: this shell's pid)
# names the bridge, links and namespaces and FN_NET (default: derived from the tag) is the
# /24 used, so that concurrent runs on one machine do not collide.
FN_TAG=${FN_TAG:-$$}
FN_NET=${FN_NET:-10.$((200 + FN_TAG % 50)).$((FN_TAG / 50 % 250))}
FN_BR=oxfb$((FN_TAG % 100000))
FN_NS=oxf$((FN_TAG % 100000))-n
fakenodes_up() {
  local n=$1 i
  FN_DIR=$(mktemp -d); FN_N=$n
  ip link add "$FN_BR" type bridge || return 1
  ip addr add "$FN_NET.1/24" dev "$FN_BR" && ip link set "$FN_BR" up || return 1
  for i in $(seq 1 "$n"); do
    ip netns add "$FN_NS$i" || return 1
    ip link add "${FN_BR}v$i" type veth peer name eth0 netns "$FN_NS$i" || return 1
    ip link set "${FN_BR}v$i" master "$FN_BR" up
    ip -n "$FN_NS$i" addr add "$FN_NET.$((10 + i))/24" dev eth0
    ip -n "$FN_NS$i" link set eth0 up; ip -n "$FN_NS$i" link set lo up
    ip -n "$FN_NS$i" route add default via "$FN_NET.1"
    echo "n$i slots=2" >> "$FN_DIR/hosts"
  done
  cat > "$FN_DIR/agent" <<AG
#!/bin/sh
# ssh-style launch agent: agent HOST CMD... (options before the host are ignored)
while [ \$# -gt 0 ]; do case \$1 in -*) shift;; *) break;; esac; done
h=\$1; shift
# Each node's own temporary directory (as a real node's /tmp): job directories a daemon
# killed with SIGKILL leaves go with \$FN_DIR (fakenodes_down).
mkdir -p "$FN_DIR/tmp/\$h"
export TMPDIR="$FN_DIR/tmp/\$h"
exec ip netns exec $FN_NS\${h#n} unshare --pid --fork --kill-child --mount-proc --ipc --uts sh -c 'hostname "\$0"; mount -t tmpfs tmpfs /dev/shm 2>/dev/null; exec "\$@"' "\$h" "\$@"
AG
  chmod +x "$FN_DIR/agent"
}
fakenodes_dummy() {
  # fakenodes_dummy NET: gives every node a second interface eth1 at NET.(10+I)/24 that
  # reaches nothing (a veth pair inside the node whose other end has no address: packets
  # vanish), as a second network no peer is reachable on.
  local i
  for i in $(seq 1 "${FN_N:-0}"); do
    ip -n "$FN_NS$i" link add eth1 type veth peer name eth1x &&
      ip -n "$FN_NS$i" addr add "$1.$((10 + i))/24" dev eth1 &&
      ip -n "$FN_NS$i" link set eth1x up && ip -n "$FN_NS$i" link set eth1 up || return 1
  done
}
fakenodes_dummy_down() {
  local i
  for i in $(seq 1 "${FN_N:-0}"); do ip -n "$FN_NS$i" link del eth1 2>/dev/null; done
}
fakenodes_second() {
  local i
  ip link add "${FN_BR}s" type bridge && ip link set "${FN_BR}s" up || return 1
  for i in $(seq 1 "${FN_N:-0}"); do
    ip link add "${FN_BR}s$i" type veth peer name eth2 netns "$FN_NS$i" &&
      ip link set "${FN_BR}s$i" master "${FN_BR}s" up &&
      ip -n "$FN_NS$i" addr add "$1.$((10 + i))/24" dev eth2 &&
      ip -n "$FN_NS$i" link set eth2 up || return 1
  done
}
fakenodes_second_src() {
  # fakenodes_second_src NET: the second network's route names eth0's address as the
  # source to use, so that only a connection bound to eth2's address leaves from it.
  local i
  for i in $(seq 1 "${FN_N:-0}"); do
    ip -n "$FN_NS$i" route replace "$1.0/24" dev eth2 proto kernel scope link \
      src "$FN_NET.$((10 + i))" || return 1
  done
}
fakenodes_second_down() {
  local i
  for i in $(seq 1 "${FN_N:-0}"); do ip link del "${FN_BR}s$i" 2>/dev/null; done
  ip link del "${FN_BR}s" 2>/dev/null
}
fakenodes_cut() {
  ip link del "${FN_BR}v$1" 2>/dev/null
}
fakenodes_pids() {
  local i
  for i in $(seq 1 "${FN_N:-0}"); do ip netns pids "$FN_NS$i" 2>/dev/null; done
}
fakenodes_down() {
  local i p
  # End what still runs on the nodes before the links go away.
  for p in $(fakenodes_pids); do kill -9 "$p" 2>/dev/null; done
  for i in $(seq 1 "${FN_N:-0}"); do
    ip netns del "$FN_NS$i" 2>/dev/null; ip link del "${FN_BR}v$i" 2>/dev/null
  done
  fakenodes_second_down
  ip link del "$FN_BR" 2>/dev/null
  [ -n "${FN_DIR:-}" ] && rm -rf "$FN_DIR"
  FN_N=0
}
fakenodes_peers() {
  # fakenodes_peers DIR PPN: PPN slots per node in $FN_DIR/hosts, the same hosts in Hydra's
  # format in DIR/hosts.hydra, and DIR/agent-sh: the agent as Hydra and Open MPI use it
  # (they hand it one shell command line, ssh style).
  sed -i "s/slots=[0-9]*/slots=$2/" "$FN_DIR/hosts"
  sed "s/ slots=\(.*\)/:\1/" "$FN_DIR/hosts" >"$1/hosts.hydra"
  cat >"$1/agent-sh" <<AG
#!/bin/sh
while [ \$# -gt 0 ]; do case \$1 in -*) shift;; *) break;; esac; done
h=\$1; shift
exec "$FN_DIR/agent" "\$h" sh -c "\$*"
AG
  chmod +x "$1/agent-sh"
}
