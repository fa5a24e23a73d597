#!/bin/bash
# cluster.sh - flexplan's emulated asymmetric cluster: several "machines" on one Linux host.
#
#   machine i = network namespace ${P}-n$i plus its own IPC and UTS namespaces
#   switch    = namespace ${P}-sw with bridge br0, connected to nothing else
#   link i    = veth ${P}-n$i:eth0 <-> ${P}-sw:sw-n$i, address ${SUBNET}.$((10+i))/24
#   rate      = tbf on the egress of both veth ends (uplink and downlink alike)
#   latency   = nfqdelay (NFQUEUE) on machine i's eth0, both directions; this kernel has no netem
#   head      = namespace ${P}-hd, ${SUBNET}.2, unshaped port on the bridge: mpirun runs there,
#               and `check` measures each machine's link against it one link at a time
#   rack k    = (EMU_RACKS) bridge rb$k in ${P}-sw; its machines' veths join it instead of br0,
#               and veth up-r$k <-> dn-r$k joins it to br0: its uplink, tbf-shaped both ways
#               (EMU_RACK_RATES), so that a rack can be oversubscribed
#
# Why a private IPC namespace per machine: UCX 1.13 treats two processes as shared-memory
# reachable when they share boot id and IPC namespace, whatever their network namespace, so
# "cross-machine" learners would bypass the links. Why a private UTS namespace: Open MPI names
# its shared-memory segments after the hostname; equal names collide.
#
#   EMU_RATES="1gbit 200mbit" EMU_LEARNERS="2 3" [EMU_DELAYS="0 500"] cluster.sh up
#   EMU_RACKS="0 0 - -" EMU_RACK_RATES="150mbit" ... cluster.sh up   # machines 0,1 in rack 0
#   cluster.sh check                   # gate: lanes, rates; run before taking any figure
#   cluster.sh exec 0 CMD...           # run CMD inside machine 0
#   cluster.sh mpirun -np 5 PROG...    # Open MPI, ranks placed machine by machine
#   cluster.sh shape 1 500mbit         # change machine 1's link rate ("none": unshaped)
#   cluster.sh delay 1 500             # machine 1's link gets 500 us one-way latency (0: none)
#   cluster.sh shape-rack 0 300mbit    # rack 0's uplink rate ("none": unshaped)
#   cluster.sh perftest SRV CLI ARGS   # ucx_perftest, server/client in a machine or "hd"
#   cluster.sh config                  # the figures the cluster is up with (shell syntax)
#   cluster.sh status ; cluster.sh down
#
# Environment: EMU_PREFIX (fxemu) and EMU_SUBNET (10.77.0) keep concurrent clusters apart.
# EMU_CC (cubic) is the TCP congestion control of every machine and the head, set on their
# subnet route (`congctl`), so the host's default and its allowed list stay as they are; "host"
# keeps the host's default. Why it is pinned: a host defaulting to BBR (this one does) left the
# level-by-level algorithms 17-27% slower than the links allow (docs/testbed.md).
# EMU_SYSCTLS="key=value ..." sets network sysctls in every machine's namespace at `up` (for
# example net.ipv4.tcp_slow_start_after_idle=0, as clusters tuned for bulk transfers run).
set -euo pipefail

P=${EMU_PREFIX:-fxemu}
SUBNET=${EMU_SUBNET:-10.77.0}          # a private /24 that exists only on our veths
GSO=${EMU_GSO:-32768}                  # veth gso_max_size
BURST=${EMU_BURST:-64kb}               # tbf bucket: MUST exceed the GSO size, or tbf
                                       # re-segments every packet in softirq (a core at 1 Gbit/s)
TBF_LAT=${EMU_TBF_LATENCY:-20ms}       # longest queueing inside tbf (sets its queue limit)
RUN=/run/$P
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

die() { echo "cluster.sh: $*" >&2; exit 1; }
need_root() { [ "$(id -u)" = 0 ] || die "must run as root"; }
is_up() { ip netns list | awk '{print $1}' | grep -qx "$P-sw"; }
need_up() { is_up && [ -f $RUN/config ] || die "cluster $P is not up (run: $0 up)"; }

# The cluster's figures live in $RUN/config once it is up, so every later command (and every
# script that sources it) sees the cluster as it is, not as the caller's environment says.
load_config() { need_up; . $RUN/config; }
save_config() {
  { echo "RATES=\"$RATES\""; echo "LEARNERS=\"$LEARNERS\""; echo "DELAYS=\"$DELAYS\"";
    echo "SUBNET=\"$SUBNET\""; echo "SYSCTLS=\"${SYSCTLS:-}\""; echo "CC=\"${CC:-host}\"";
    echo "RACKS=\"${RACKS:-}\""; echo "RACK_RATES=\"${RACK_RATES:-}\""; } > $RUN/config
}
nth() { local i=$1; shift; set -- $*; i=$((i + 1)); echo "${!i}"; }
set_nth() { # list index value -> list with entry index replaced
  local list=$1 i=$2 v=$3 out="" k=0 x
  for x in $list; do [ $k = "$i" ] && x=$v; out="$out $x"; k=$((k + 1)); done
  echo ${out# }
}
count() { set -- $*; echo $#; }
rate_mbit() { # "1gbit" -> 1000, "200mbit" -> 200, "none" -> none
  case "$1" in
    none) echo none ;;
    *gbit) awk -v v="${1%gbit}" 'BEGIN{print v * 1000}' ;;
    *mbit) echo "${1%mbit}" ;;
    *kbit) awk -v v="${1%kbit}" 'BEGIN{print v / 1000}' ;;
    *) die "rate '$1': write it as NUMgbit, NUMmbit, NUMkbit or none" ;;
  esac
}
check_node() { [[ $1 =~ ^[0-9]+$ ]] && [ "$1" -lt "$(count $RATES)" ] || die "no machine '$1'"; }

nsx() { # machine cmd... : run in machine's network, IPC and UTS namespaces
  local n=$1; shift
  nsenter --net=/run/netns/$P-n$n --ipc=$RUN/ipc-n$n --uts=$RUN/uts-n$n -- "$@"
}

# ---- link rate
shape_dev() { # namespace device rate
  ip netns exec "$1" tc qdisc del dev "$2" root 2>/dev/null || true
  [ "$3" = none ] && return 0
  ip netns exec "$1" tc qdisc add dev "$2" root tbf rate "$3" burst "$BURST" latency "$TBF_LAT"
}
cmd_shape() { # machine rate
  load_config; check_node "$1"; rate_mbit "$2" >/dev/null
  shape_dev $P-n$1 eth0 "$2"      # uplink   (machine -> switch)
  shape_dev $P-sw sw-n$1 "$2"     # downlink (switch -> machine)
  RATES=$(set_nth "$RATES" "$1" "$2"); save_config
  rm -f $RUN/goodput              # the links changed: `check` must measure them again
}

# rack uplinks: up-r$k carries rack -> top, dn-r$k top -> rack (each shaped on its egress)
rack_count() { set -- ${RACK_RATES:-}; echo $#; }
cmd_shape_rack() { # rack rate
  load_config
  [[ $1 =~ ^[0-9]+$ ]] && [ "$1" -lt "$(rack_count)" ] || die "no rack '$1'"
  rate_mbit "$2" >/dev/null
  shape_dev $P-sw up-r$1 "$2"
  shape_dev $P-sw dn-r$1 "$2"
  RACK_RATES=$(set_nth "$RACK_RATES" "$1" "$2"); save_config
}

# ---- link latency: every packet that leaves or enters machine i's eth0 waits DELAY_US in
# nfqdelay, so a message between machines i and j is delayed by delay_i + delay_j, as the
# topology model adds the latencies of the links a message crosses.
build_nfqdelay() {
  [ -x $RUN/nfqdelay ] && return 0
  gcc -O2 -Wall -Wextra -o $RUN/nfqdelay "$HERE/nfqdelay.c" -lnetfilter_queue -lnfnetlink \
    || die "cannot build nfqdelay (apt-get install gcc libnetfilter-queue-dev)"
}
nfq_rules() { # machine -A|-D
  ip netns exec $P-n$1 iptables "$2" OUTPUT -o eth0 -j NFQUEUE --queue-num 0 --queue-bypass
  ip netns exec $P-n$1 iptables "$2" INPUT -i eth0 -j NFQUEUE --queue-num 0 --queue-bypass
}
cmd_delay() { # machine delay_us
  load_config; check_node "$1"
  local n=$1 us=$2
  [[ $us =~ ^[0-9]+$ ]] || die "delay '$us': a whole number of microseconds"
  nfq_rules $n -D 2>/dev/null || true
  if [ -f $RUN/nfq-n$n.pid ]; then
    kill "$(cat $RUN/nfq-n$n.pid)" 2>/dev/null || true
    rm -f $RUN/nfq-n$n.pid
  fi
  if [ "$us" != 0 ]; then
    build_nfqdelay
    # nsenter execs (no fork), so $! is nfqdelay's own pid
    # real-time priority: a late wake-up here is extra latency and a burst on the link
    nsenter --net=/run/netns/$P-n$n -- chrt -f 20 $RUN/nfqdelay 0 "$us" </dev/null >$RUN/nfq-n$n.log 2>&1 &
    echo $! > $RUN/nfq-n$n.pid
    sleep 0.2
    kill -0 "$(cat $RUN/nfq-n$n.pid)" 2>/dev/null || die "nfqdelay failed: $(cat $RUN/nfq-n$n.log)"
    nfq_rules $n -A
  fi
  DELAYS=$(set_nth "$DELAYS" "$n" "$us"); save_config
  rm -f $RUN/goodput
}

# ---- bring up / tear down
# pin_cc NAMESPACE ADDRESS: TCP over the cluster's subnet in NAMESPACE uses congestion control
# $CC (a route attribute: a namespace's default may only be one the host allows everyone).
pin_cc() {
  [[ $CC == host* ]] && return 0
  ip -n "$1" route replace $SUBNET.0/24 dev eth0 proto kernel scope link src "$2" congctl "$CC" \
    || die "could not set congestion control $CC in $1"
}
cmd_up() {
  need_root
  RATES=${EMU_RATES:-"1gbit 1gbit"}
  SYSCTLS=${EMU_SYSCTLS:-}
  local kv; for kv in $SYSCTLS; do [[ $kv =~ ^net\.[a-z0-9_.]+=[0-9a-z]+$ ]] || die "EMU_SYSCTLS entry '$kv' is not net.KEY=VALUE"; done
  LEARNERS=${EMU_LEARNERS:-"2 3"}
  CC=${EMU_CC:-cubic}
  if [ "$CC" = host ]; then
    CC="host ($(cat /proc/sys/net/ipv4/tcp_congestion_control))"
  else
    [[ " $(cat /proc/sys/net/ipv4/tcp_available_congestion_control) " == *" $CC "* ]] \
      || die "EMU_CC '$CC' is not an available congestion control ($(cat /proc/sys/net/ipv4/tcp_available_congestion_control); 'host' keeps the host's default)"
  fi
  local n; n=$(count $RATES)
  DELAYS=${EMU_DELAYS:-$(for ((i = 0; i < n; i++)); do printf '0 '; done)}
  [ "$n" -ge 2 ] || die "EMU_RATES needs a rate per machine, two machines at least"
  [ "$(count $LEARNERS)" = "$n" ] || die "EMU_LEARNERS ('$LEARNERS') needs one count per machine ($n)"
  [ "$(count $DELAYS)" = "$n" ] || die "EMU_DELAYS ('$DELAYS') needs one delay per machine ($n)"
  RACKS=${EMU_RACKS:-}
  RACK_RATES=${EMU_RACK_RATES:-}
  if [ -n "$RACKS" ]; then
    [ "$(count $RACKS)" = "$n" ] || die "EMU_RACKS ('$RACKS') needs one rack number or '-' per machine ($n)"
    local k; for k in $RACKS; do
      [ "$k" = - ] && continue
      [[ $k =~ ^[0-9]+$ ]] && [ "$k" -lt "$(count $RACK_RATES)" ] \
        || die "EMU_RACKS entry '$k': a rack number below $(count $RACK_RATES) (one EMU_RACK_RATES entry per rack) or '-'"
    done
    for r in $RACK_RATES; do rate_mbit "$r" >/dev/null; done
  else
    [ -z "$RACK_RATES" ] || die "EMU_RACK_RATES without EMU_RACKS: say which machines each rack holds"
  fi
  local r l; for r in $RATES; do rate_mbit "$r" >/dev/null; done
  for l in $LEARNERS; do [[ $l =~ ^[1-9][0-9]*$ ]] || die "learner count '$l' must be positive"; done
  is_up && die "cluster $P is already up (run: $0 down)"
  UP_OK=0
  trap '[ "${UP_OK:-0}" = 1 ] || { echo "cluster.sh: up failed; tearing down" >&2; cmd_down >&2; }' EXIT
  mkdir -p $RUN
  save_config
  ip netns add $P-sw
  ip -n $P-sw link set lo up
  ip -n $P-sw link add br0 type bridge
  ip -n $P-sw link set br0 up
  local i=0 k
  for r in $RACK_RATES; do
    ip -n $P-sw link add rb$i type bridge
    ip -n $P-sw link set rb$i up
    ip -n $P-sw link add up-r$i type veth peer name dn-r$i
    ip -n $P-sw link set up-r$i gso_max_size $GSO
    ip -n $P-sw link set dn-r$i gso_max_size $GSO
    ip -n $P-sw link set up-r$i master rb$i
    ip -n $P-sw link set dn-r$i master br0
    ip -n $P-sw link set up-r$i up
    ip -n $P-sw link set dn-r$i up
    shape_dev $P-sw up-r$i "$r"
    shape_dev $P-sw dn-r$i "$r"
    i=$((i + 1))
  done
  i=0
  for r in $RATES; do
    ip netns add $P-n$i
    # veths are created inside the namespaces: nothing ever appears in the host's namespace
    ip -n $P-n$i link add eth0 type veth peer name sw-n$i netns $P-sw
    ip -n $P-n$i link set eth0 gso_max_size $GSO
    ip -n $P-sw link set sw-n$i gso_max_size $GSO
    ip -n $P-n$i link set lo up
    ip -n $P-n$i addr add $SUBNET.$((10 + i))/24 dev eth0
    ip -n $P-n$i link set eth0 up
    pin_cc $P-n$i $SUBNET.$((10 + i))
    for kv in $SYSCTLS; do ip netns exec $P-n$i sysctl -qw "$kv" || die "sysctl $kv in machine $i failed"; done
    k=br0
    if [ -n "$RACKS" ] && [ "$(nth $i $RACKS)" != - ]; then k=rb$(nth $i $RACKS); fi
    ip -n $P-sw link set sw-n$i master $k
    ip -n $P-sw link set sw-n$i up
    touch $RUN/ipc-n$i $RUN/uts-n$i
    unshare --ipc=$RUN/ipc-n$i true
    unshare --uts=$RUN/uts-n$i hostname n$i
    shape_dev $P-n$i eth0 "$r"
    shape_dev $P-sw sw-n$i "$r"
    i=$((i + 1))
  done
  ip netns add $P-hd
  ip -n $P-hd link add eth0 type veth peer name sw-hd netns $P-sw
  ip -n $P-hd link set lo up
  ip -n $P-hd addr add $SUBNET.2/24 dev eth0
  ip -n $P-hd link set eth0 up
  pin_cc $P-hd $SUBNET.2
  ip -n $P-sw link set sw-hd master br0
  ip -n $P-sw link set sw-hd up
  # Open MPI: a hostfile in machine order, and an rsh agent that maps host "nI" to machine I
  : > $RUN/hostfile
  i=0; for l in $LEARNERS; do echo "n$i slots=$l" >> $RUN/hostfile; i=$((i + 1)); done
  cat > $RUN/rsh <<EOF
#!/bin/bash
# plm_rsh_agent: "rsh [options] HOST CMD..." runs CMD in machine HOST's namespaces
while [ "\${1#-}" != "\$1" ]; do shift; done
n=\${1#n}; shift
exec nsenter --net=/run/netns/$P-n\$n --ipc=$RUN/ipc-n\$n --uts=$RUN/uts-n\$n -- /bin/sh -c "\$*"
EOF
  chmod +x $RUN/rsh
  i=0; for d in $DELAYS; do [ "$d" != 0 ] && cmd_delay $i "$d"; i=$((i + 1)); done
  UP_OK=1
  cmd_status
}

cmd_down() {
  local ns pid f
  for ns in $(ip netns list | awk '{print $1}' | grep "^$P-" || true); do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill "$pid" 2>/dev/null || true; done
  done
  sleep 0.3
  for ns in $(ip netns list | awk '{print $1}' | grep "^$P-" || true); do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
    ip netns del "$ns"        # takes its veths, qdiscs and iptables rules with it
  done
  if [ -d $RUN ]; then
    for f in $RUN/ipc-n* $RUN/uts-n*; do [ -e "$f" ] && { umount "$f" 2>/dev/null || true; }; done
    rm -rf $RUN
  fi
  echo "cluster $P: down"
}

cmd_status() {
  is_up || { echo "cluster $P: down"; return 0; }
  load_config
  local n
  for ((n = 0; n < $(count $RATES); n++)); do
    printf 'machine %s  %s  learners %s  rate %s  delay %s us  (up: %s  down: %s  nfqdelay: %s)\n' \
      $n "$(ip -n $P-n$n -4 -br addr show eth0 | awk '{print $3}')" \
      "$(nth $n $LEARNERS)" "$(nth $n $RATES)" "$(nth $n $DELAYS)" \
      "$(ip netns exec $P-n$n tc qdisc show dev eth0 | head -1 | awk '{print $2, $8}')" \
      "$(ip netns exec $P-sw tc qdisc show dev sw-n$n | head -1 | awk '{print $2, $8}')" \
      "$([ -f $RUN/nfq-n$n.pid ] && kill -0 "$(cat $RUN/nfq-n$n.pid)" 2>/dev/null && echo running || echo none)"
  done
  local k members
  for ((k = 0; k < $(rack_count); k++)); do
    members=""
    for ((n = 0; n < $(count $RATES); n++)); do [ "$(nth $n $RACKS)" = "$k" ] && members="$members $n"; done
    printf 'rack %s  machines%s  uplink %s  (up: %s  down: %s)\n' $k "$members" "$(nth $k $RACK_RATES)" \
      "$(ip netns exec $P-sw tc qdisc show dev up-r$k | head -1 | awk '{print $2, $8}')" \
      "$(ip netns exec $P-sw tc qdisc show dev dn-r$k | head -1 | awk '{print $2, $8}')"
  done
}

cmd_config() { load_config; cat $RUN/config; echo "RUN=\"$RUN\""; }
cmd_perftest() { load_config; perftest "$@"; }
cmd_exec() { load_config; check_node "$1"; local n=$1; shift; UCX_NET_DEVICES=eth0 nsx "$n" "$@"; }

# ---- measurements: lanes and latencies with ucx_perftest (the transport the runtime uses),
# link rates with iperf3 (timed where the data arrives).
# perftest SERVER_SIDE CLIENT_SIDE PORT ARGS: a side is a machine number or "hd" (the head).
# The client sends to the server. Prints ucx_perftest's final result line.
side_run() { local s=$1; shift
  if [ "$s" = hd ]; then ip netns exec $P-hd "$@"; else nsx "$s" "$@"; fi; }
side_addr() { if [ "$1" = hd ]; then echo $SUBNET.2; else echo $SUBNET.$((10 + $1)); fi; }
perftest() {
  local srv=$1 cli=$2 port=$3; shift 3
  UCX_NET_DEVICES=eth0 side_run "$srv" timeout 120 ucx_perftest -f -p "$port" "$@" >/dev/null 2>&1 &
  local sp=$!
  sleep 0.5
  UCX_NET_DEVICES=eth0 side_run "$cli" timeout 120 ucx_perftest "$(side_addr "$srv")" -f -p "$port" "$@" 2>&1 \
    | awk '/^ +[0-9]/{print}'
  wait $sp || true
}
lanes() { # srv cli -> the lanes UCX picked for the client's first tag endpoint
  UCX_LOG_LEVEL=info UCX_NET_DEVICES=eth0 side_run "$1" timeout 30 ucx_perftest -p 13379 -t tag_bw -s 8 -n 10 >/dev/null 2>&1 &
  local sp=$!; sleep 0.5
  UCX_LOG_LEVEL=info UCX_NET_DEVICES=eth0 side_run "$2" timeout 30 ucx_perftest "$(side_addr "$1")" -p 13379 -t tag_bw -s 8 -n 10 2>&1 \
    | grep -o 'tag([^)]*)' | head -1 || true
  wait $sp || true
}
goodput_mbit() { # srv cli -> payload Mbit/s the server received over 2 s (iperf3, one TCP flow)
  # Timed at the receiver: a sender would count what still sits in socket buffers as sent.
  side_run "$1" timeout 30 iperf3 -s -1 -p 13380 >/dev/null 2>&1 &
  local sp=$!; sleep 0.3
  side_run "$2" timeout 30 iperf3 -c "$(side_addr "$1")" -p 13380 -t 2 -J 2>/dev/null \
    | python3 -c 'import json,sys; print("%.1f" % (json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"] / 1e6))' \
    2>/dev/null || true
  wait $sp || true
}

# The gate before any figure: cross-machine traffic is TCP on eth0, intra-machine traffic is
# shared memory, and every link carries its set rate in both directions (payload is 1448/1514
# of the wire rate: TCP/IP/Ethernet headers). Each link is measured alone against the head.
rate_ok() { awk -v m="${1:-0}" -v e="$2" 'BEGIN{exit !(m > 0.95 * e && m < 1.02 * e)}'; }
cmd_check() {
  load_config
  local x y i r lim mbps ok=1 expect try dir
  rm -f $RUN/goodput
  x=$(lanes 0 1); y=$(lanes 0 0)
  echo "lanes machine1->machine0: $x"
  echo "lanes machine0->machine0: $y"
  [[ $x == *tcp/eth0* && $x != *sysv* && $x != *posix* && $x != *cma* ]] \
    || die "check: cross-machine traffic does not go over tcp/eth0 ($x)"
  [[ $y == *sysv* || $y == *posix* ]] || die "check: intra-machine traffic is not on shared memory ($y)"
  for ((i = 0; i < $(count $RATES); i++)); do
    r=$(nth $i $RATES); lim=$(rate_mbit "$r")
    [ "$lim" = none ] && { echo "link $i: unshaped, not checked"; continue; }
    expect=$(awk -v l="$lim" 'BEGIN{printf "%.1f", l * 1448 / 1514}')
    for dir in up down; do
      # up to 3 tries: other jobs on the host can hold a reading down for a while
      for try in 1 2 3; do
        if [ $dir = up ]; then mbps=$(goodput_mbit hd $i); else mbps=$(goodput_mbit $i hd); fi
        rate_ok "$mbps" "$expect" && break
      done
      printf 'link %s %-4s set %s: goodput %s Mbit/s, expected %s\n' $i $dir "$r" "${mbps:-?}" "$expect"
      rate_ok "$mbps" "$expect" || ok=0
      echo "$i $dir ${mbps:-0}" >> $RUN/goodput   # calibrate.py records these readings
    done
  done
  [ $ok = 1 ] || { rm -f $RUN/goodput; die "check: a link does not carry its set rate (within -5%/+2%)"; }
  echo "check: OK"
}

cmd_mpirun() {
  load_config
  # the learners get the caller's UCX_* and FLEXPLAN_* settings (transport and runtime tuning)
  local forward=() v
  for v in $(compgen -e | grep -E '^(UCX|FLEXPLAN)_' | grep -vx UCX_NET_DEVICES || true); do
    forward+=(-x "$v")
  done
  # Every machine's learners share this host's cores, which a learner cannot see (it counts the
  # processes of its own machine): no spinning before yielding, unless the caller asks for it.
  [ -n "${FLEXPLAN_SPIN_US:-}" ] || forward+=(-x FLEXPLAN_SPIN_US=0)
  # mpirun runs in the head namespace; the rsh agent starts an orted in each machine's
  # namespaces. Open MPI 4.1 disables pml ucx when only TCP is present, so it is forced.
  # mpi_yield_when_idle: learners that spin on 2 cores starve each other.
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  ip netns exec $P-hd mpirun --hostfile $RUN/hostfile \
      --mca plm_rsh_agent $RUN/rsh --mca plm_rsh_no_tree_spawn 1 \
      --mca oob_tcp_if_include $SUBNET.0/24 --mca btl_tcp_if_include $SUBNET.0/24 \
      --mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any --mca btl ^openib,uct \
      --mca mpi_yield_when_idle 1 -x UCX_NET_DEVICES=eth0 "${forward[@]}" --bind-to none "$@"
}

case "${1:-}" in
  up|down|status|config|check|shape|delay|exec|perftest|mpirun) c=$1; shift; cmd_$c "$@" ;;
  shape-rack) shift; cmd_shape_rack "$@" ;;
  *) sed -n '2,31p' "$0"; exit 1 ;;
esac
