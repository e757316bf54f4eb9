#!/usr/bin/env bash
# Two "hosts" on this machine: two network namespaces joined by a veth pair, each with its own
# address, hostname and /etc/hosts, so a multi-node job runs over a real (virtual) link instead of
# loopback. Needs root (or CAP_NET_ADMIN + CAP_SYS_ADMIN) and iproute2.
#
#   two_hosts.sh up ID                 create node0 (10.77.0.1) and node1 (10.77.0.2); exit 77 if not possible
#   two_hosts.sh exec ID N CMD...      run CMD on node N (0 or 1) with GLOO_SOCKET_IFNAME set to its link
#   two_hosts.sh kill ID N             SIGKILL every process on node N (a whole node dies)
#   two_hosts.sh link ID up|down       bring node1's end of the link up or down (a network fault)
#   two_hosts.sh down ID               kill what still runs on both nodes and remove everything
#
# ID (1-8 lowercase letters or digits) keeps concurrent users apart: the namespaces are
# shoplens-ID-0 and shoplens-ID-1, the link is called slnet0 on both. Inside node N the hostname
# is shoplens-ID-nodeN and both names resolve to the nodes' addresses.
set -euo pipefail

readonly LINK=slnet0
die() { echo "two_hosts: $*" >&2; exit 1; }
skip() { echo "two_hosts: SKIP: $*" >&2; exit 77; }

check_id() { [[ "${1:-}" =~ ^[a-z0-9]{1,8}$ ]] || die "ID must be 1-8 lowercase letters or digits, got '${1:-}'"; }
ns() { echo "shoplens-$1-$2"; }
addr() { echo "10.77.0.$(( $1 + 1 ))"; }
host() { echo "shoplens-$1-node$2"; }

up() {
  local id=$1
  [ "$(id -u)" -eq 0 ] || skip "network namespaces need root (running as uid $(id -u))"
  command -v ip >/dev/null || skip "iproute2 ('ip') is not installed"
  down "$id" 2>/dev/null || true
  ip netns add "$(ns "$id" 0)" 2>/dev/null || skip "'ip netns add' is not allowed here (no CAP_SYS_ADMIN / unshare)"
  trap 'down "$id" 2>/dev/null' ERR
  ip netns add "$(ns "$id" 1)"
  ip link add "sl${id}a" type veth peer name "sl${id}b" 2>/dev/null || { down "$id"; skip "cannot create a veth pair (no veth module?)"; }
  local n end
  for n in 0 1; do
    end=$([ "$n" = 0 ] && echo a || echo b)
    ip link set "sl${id}${end}" netns "$(ns "$id" "$n")"
    ip -n "$(ns "$id" "$n")" link set "sl${id}${end}" name "$LINK"
    ip -n "$(ns "$id" "$n")" addr add "$(addr "$n")/24" dev "$LINK"
    ip -n "$(ns "$id" "$n")" link set "$LINK" up
    ip -n "$(ns "$id" "$n")" link set lo up
    # `ip netns exec` bind-mounts /etc/netns/NS/hosts over /etc/hosts.
    mkdir -p "/etc/netns/$(ns "$id" "$n")"
    printf '127.0.0.1 localhost\n%s %s\n%s %s\n' "$(addr 0)" "$(host "$id" 0)" "$(addr 1)" "$(host "$id" 1)" \
      > "/etc/netns/$(ns "$id" "$n")/hosts"
  done
  trap - ERR
  echo "two_hosts: node0 $(addr 0) and node1 $(addr 1) up (link $LINK)"
}

# Each node gets its own hostname (a UTS namespace), as a real host has.
run_on() {
  local id=$1 n=$2; shift 2
  # shellcheck disable=SC2016  # $0 and $@ are the inner shell's
  exec ip netns exec "$(ns "$id" "$n")" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$(host "$id" "$n")" \
    env GLOO_SOCKET_IFNAME="$LINK" "$@"
}

# A node dies all at once. Killing its processes one by one would let a worker outlive its
# launcher for a moment under load: the launcher's death sends the worker SIGTERM
# (PR_SET_PDEATHSIG), and a worker that still runs turns that into an orderly, agreed stop of
# the whole job. So everything is frozen first, then killed.
kill_node() {
  local pids
  pids=$(ip netns pids "$(ns "$1" "$2")" 2>/dev/null || true)
  [ -n "$pids" ] || return 0
  # shellcheck disable=SC2086  # one argument per pid
  kill -STOP $pids 2>/dev/null || true
  # A child forked between the listing and its parent's freeze is caught by the second listing.
  pids=$(ip netns pids "$(ns "$1" "$2")" 2>/dev/null || true)
  # shellcheck disable=SC2086
  kill -STOP $pids 2>/dev/null || true
  # shellcheck disable=SC2086
  kill -9 $pids 2>/dev/null || true
}

down() {
  local id=$1 n
  for n in 0 1; do
    kill_node "$id" "$n"
    ip netns delete "$(ns "$id" "$n")" 2>/dev/null || true
    rm -rf "/etc/netns/$(ns "$id" "$n")"
    rmdir /etc/netns 2>/dev/null || true
  done
  ip link delete "sl${id}a" 2>/dev/null || true
}

cmd=${1:-}; shift || true
check_id "${1:-}"
case "$cmd" in
  up) up "$1" ;;
  down) down "$1" ;;
  exec) [ $# -ge 3 ] || die "usage: exec ID N CMD..."; [[ "$2" =~ ^[01]$ ]] || die "N must be 0 or 1"; run_on "$@" ;;
  kill) [[ "${2:-}" =~ ^[01]$ ]] || die "usage: kill ID 0|1"; kill_node "$1" "$2" ;;
  link) [[ "${2:-}" =~ ^(up|down)$ ]] || die "usage: link ID up|down"; ip -n "$(ns "$1" 1)" link set "$LINK" "$2" ;;
  *) die "usage: two_hosts.sh up|down|exec|kill|link ID ..." ;;
esac
