# The faults of `scripts/faults --nemesis`, sourced by scripts/faults once the cluster runs
# in the network namespaces of scripts/faults.d/net. Each fault is a function that injects
# it, holds it, heals it and writes what it did to the timeline; the caller then waits for a
# full ISR and for the writer to make progress. Uses scripts/faults' D, RUN, BS, CLUSTER,
# TOPIC, PARTITIONS, SESSION_MS, KRAFT, client, leaders, leader_of, log and die.

NET="$REPO_ROOT/scripts/faults.d/net"
T0=
BROKERS=(b1 b2 b3)
# What keeps the cluster's metadata: a three-node ZooKeeper ensemble, or (--kraft) three
# Kafka controllers, a static quorum.
if ((KRAFT)); then QUORUM=(k1 k2 k3) QUORUM_NAME=controllers; else QUORUM=(z1 z2 z3) QUORUM_NAME=ZooKeeper; fi

# One line of the timeline: seconds since the faults began, then what happened.
event() {
  local line
  T0=${T0:-$SECONDS}
  line=$(printf '%6ds  %s' $((SECONDS - T0)) "$*")
  echo "$line" >>"$D/timeline"
  printf '[faults] %s\n' "$line" >&2
}

# A random element of the arguments, from bash's RANDOM (seeded with --seed).
pick() { local a=("$@"); echo "${a[RANDOM % ${#a[@]}]}"; }

# Nodes other than those given, out of brokers, the quorum's nodes and the clients.
others() {
  local n out=()
  for n in "${BROKERS[@]}" "${QUORUM[@]}" c; do
    [[ " $* " == *" $n "* ]] || out+=("$n")
  done
  echo "${out[@]}"
}

# cut_both A "B C ...": no packet either way between A and each of the others.
cut_both() {
  local a=$1 b; shift
  "$NET" cut "$RUN" "$a" "$@"
  for b in "$@"; do "$NET" cut "$RUN" "$b" "$a"; done
}

heal() { "$NET" heal "$RUN"; }

# The controller as the last full ISR was seen (the leaders' fourth column), else asked.
controller_id() {
  local c
  c=$(awk 'NR == 1 {print $4}' <<<"$(known_leaders)")
  if [[ $c =~ ^[1-3]$ ]]; then echo "$c"; else client controller "$BS" 2>/dev/null || true; fi
}

# The leaders as the last full ISR was seen ("partition leader isr-size controller" lines).
known_leaders() { cat "$D/leaders.full" 2>/dev/null || leaders; }

# A partition's leader (broker number), as a fault's target: partition (round - 1) mod P.
target_leader() {
  local l
  l=$(awk -v p="$(((round - 1) % PARTITIONS))" '$1 == p {print $2}' <<<"$(known_leaders)")
  if [[ $l =~ ^[1-3]$ ]]; then echo "$l"; else leader_of "$(((round - 1) % PARTITIONS))"; fi
}

# A leader that is not the controller, if there is one.
target_non_controller() {
  local c l
  c=$(controller_id)
  for l in $(awk '{print $2}' <<<"$(known_leaders)"); do
    [[ $l =~ ^[1-3]$ && $l != "$c" ]] && { echo "$l"; return; }
  done
  target_leader
}

HOLD_S=$((SESSION_MS / 1000 + 4))

fault_isolate() {
  local x; x=$(target_leader) || die "no leader to isolate"
  event "isolate broker $x (a leader) from every other node: brokers, $QUORUM_NAME, clients"
  cut_both "b$x" $(others "b$x")
  sleep "$HOLD_S"; heal; event "healed"
}

fault_isolate_zk() {
  local x; x=$(target_leader) || die "no leader"
  event "isolate broker $x (a leader) from ZooKeeper only, past its session timeout"
  cut_both "b$x" "${QUORUM[@]}"
  sleep "$HOLD_S"; heal; event "healed"
}

fault_isolate_clients() {
  local x; x=$(target_leader) || die "no leader"
  event "isolate broker $x (a leader) from the clients only"
  cut_both "b$x" c
  sleep "$HOLD_S"; heal; event "healed"
}

fault_split() {
  local x z; x=$(target_leader) || die "no leader"; z=$(pick "${QUORUM[@]}")
  event "split: minority {b$x $z} | majority {$(others "b$x" "$z")}"
  local n
  for n in "b$x" "$z"; do "$NET" cut "$RUN" "$n" $(others "b$x" "$z"); done
  for n in $(others "b$x" "$z"); do "$NET" cut "$RUN" "$n" "b$x" "$z"; done
  sleep "$HOLD_S"; heal; event "healed"
}

fault_bridge() {
  local x y
  x=$(target_leader) || die "no leader"
  y=$(pick $(printf '%s\n' 1 2 3 | grep -vx "$x"))
  event "bridge: brokers $x and $y cannot reach each other, each still reaches the third broker, $QUORUM_NAME and the clients"
  cut_both "b$x" "b$y"
  sleep "$HOLD_S"; heal; event "healed"
}

fault_asymmetric() {
  local x; x=$(target_leader) || die "no leader"
  if ((RANDOM % 2)); then
    event "asymmetric: broker $x (a leader) sends nothing to the other brokers (it still receives)"
    "$NET" cut "$RUN" "b$x" $(printf 'b%s ' 1 2 3 | tr ' ' '\n' | grep -vx "b$x")
  else
    event "asymmetric: broker $x (a leader) receives nothing from the other brokers (it still sends)"
    local b
    for b in $(printf 'b%s ' 1 2 3 | tr ' ' '\n' | grep -vx "b$x"); do "$NET" cut "$RUN" "$b" "b$x"; done
  fi
  sleep "$HOLD_S"; heal; event "healed"
}

fault_delay() {
  local x ms jitter; x=$(target_leader) || die "no leader"
  ms=$((100 + RANDOM % 401)) jitter=$((ms / 4))
  event "delay: every packet to and from broker $x (a leader) takes ${ms} ms +- ${jitter} ms"
  "$NET" slow "$RUN" "$ms" "$jitter" "b$x"
  sleep "$HOLD_S"; heal; event "healed"
}

fault_flap() {
  local x k; x=$(target_leader) || die "no leader"
  event "flap: broker $x (a leader) cut from every other node and back, every 2 s, 5 times"
  for ((k = 0; k < 5; k++)); do
    cut_both "b$x" $(others "b$x")
    sleep 2; heal; sleep 2
  done
  event "healed"
}

fault_zk_kill_one() {
  local z; z=$(pick 1 2 3)
  event "kill -9 ZooKeeper node $z (the ensemble keeps its quorum)"
  "$REPO_ROOT/scripts/zk" kill "$D/zk" "$z"
  sleep "$HOLD_S"
  "$REPO_ROOT/scripts/zk" restart "$D/zk" "$z"; event "ZooKeeper node $z restarted"
}

fault_zk_kill_two() {
  local keep; keep=$(pick 1 2 3)
  local gone; gone=$(printf '%s\n' 1 2 3 | grep -vx "$keep" | paste -sd ' ')
  event "kill -9 ZooKeeper nodes $gone (quorum lost; the brokers keep serving what they can)"
  local z
  for z in $gone; do "$REPO_ROOT/scripts/zk" kill "$D/zk" "$z"; done
  sleep "$HOLD_S"
  for z in $gone; do "$REPO_ROOT/scripts/zk" restart "$D/zk" "$z"; done
  event "ZooKeeper nodes $gone restarted (quorum back)"
}

fault_zk_expire_controller() {
  local x; x=$(controller_id)
  [[ $x =~ ^[1-3]$ ]] || die "no controller"
  event "expire the controller's ZooKeeper session: broker $x cut from ZooKeeper past its session timeout"
  cut_both "b$x" "${QUORUM[@]}"
  sleep "$HOLD_S"; heal; event "healed"
}

fault_zk_expire_leader() {
  local x; x=$(target_non_controller) || die "no leader"
  event "expire a leader's ZooKeeper session: broker $x cut from ZooKeeper past its session timeout"
  cut_both "b$x" "${QUORUM[@]}"
  sleep "$HOLD_S"; heal; event "healed"
}

# The KRaft quorum's faults: controllers k1..k3 (node ids 3000..3002) of scripts/cluster.

fault_isolate_ctl() {
  local x; x=$(target_leader) || die "no leader"
  event "isolate broker $x (a leader) from the controllers only, past its session timeout (fenced)"
  cut_both "b$x" "${QUORUM[@]}"
  sleep "$HOLD_S"; heal; event "healed"
}

# K (1..3) of the quorum's leader, or nothing when none answers.
active_controller() { "$CLUSTER" active-controller "$D" 2>/dev/null || true; }

fault_ctl_kill_one() {
  local k; k=$(pick 1 2 3)
  event "kill -9 controller $k (node $((2999 + k)); active: $(active_controller); the quorum keeps its majority)"
  "$CLUSTER" controller-kill "$D" "$k" 2>/dev/null
  sleep "$HOLD_S"
  "$CLUSTER" controller-start "$D" "$k"; event "controller $k restarted"
}

fault_ctl_kill_two() {
  local keep; keep=$(pick 1 2 3)
  local gone; gone=$(printf '%s\n' 1 2 3 | grep -vx "$keep" | paste -sd ' ')
  event "kill -9 controllers $gone (quorum lost: no metadata changes, the brokers keep serving what they can)"
  local k
  for k in $gone; do "$CLUSTER" controller-kill "$D" "$k" 2>/dev/null; done
  sleep "$HOLD_S"
  for k in $gone; do "$CLUSTER" controller-start "$D" "$k"; done
  event "controllers $gone restarted (quorum back)"
}

fault_ctl_kill_active() {
  local k; k=$(active_controller)
  [[ $k =~ ^[1-3]$ ]] || die "no active controller"
  event "kill -9 the active controller, controller $k (node $((2999 + k))): the quorum elects another"
  "$CLUSTER" controller-kill "$D" "$k" 2>/dev/null
  sleep "$HOLD_S"
  "$CLUSTER" controller-start "$D" "$k"; event "controller $k restarted (active now: $(active_controller))"
}

fault_ctl_fence_leader() {
  local x k; x=$(target_leader) || die "no leader"; k=$(active_controller)
  [[ $k =~ ^[1-3]$ ]] || die "no active controller"
  event "broker $x (a leader) cut from the active controller only (controller $k; the others still reach it), past its session timeout (fenced)"
  cut_both "b$x" "k$k"
  sleep "$HOLD_S"; heal; event "healed"
}

# The broker whose second log dir (the loop-mounted file system) holds a replica it leads,
# else any broker holding a replica there.
disk_target() {
  local p l
  for ((p = 0; p < PARTITIONS; p++)); do
    l=$(awk -v p="$p" '$1 == p {print $2}' <<<"$(known_leaders)")
    [[ $l =~ ^[1-3]$ && -d $D/broker-$l/disk/$TOPIC-$p ]] && { echo "$l"; return; }
  done
  for l in 1 2 3; do
    compgen -G "$D/broker-$l/disk/$TOPIC-*" >/dev/null && { echo "$l"; return; }
  done
  pick 1 2 3
}

# What of the topic broker $1 keeps on its second log dir.
on_disk() { (cd "$D/broker-$1/disk" && ls -d "$TOPIC"-* 2>/dev/null | tr '\n' ' ') || true; }

# Stops broker $1, runs the rest of the arguments (the repair), starts the broker again.
restart_after() {
  local b=$1; shift
  local t=$SECONDS
  "$CLUSTER" term "$D" "$b"
  event "broker $b stopped (SIGTERM) in $((SECONDS - t)) s"
  "$@"
  "$CLUSTER" restart "$D" "$b"
  event "broker $b restarted on the repaired dir"
}

# Mounts broker $1's second log dir. Without lost+found: Kafka refuses to start on a log dir
# holding a directory that is not a partition's.
mount_disk() {
  mount -o loop "$D/broker-$1/disk.img" "$D/broker-$1/disk"
  rmdir "$D/broker-$1/disk/lost+found" 2>/dev/null || true
}

fault_disk_full() {
  local b free; b=$(disk_target)
  local before; before=$(grep -ciE 'log dir is offline|Stopping serving (logs|replicas) in dir' "$D/broker-$b/server.log" || true)
  free=$(df -B1 --output=avail "$D/broker-$b/disk" | tail -n 1)
  event "fill broker $b's second log dir (holding: $(on_disk "$b")): ENOSPC from now on"
  fallocate -l "$free" "$D/broker-$b/disk/filler" 2>/dev/null || true
  dd if=/dev/zero of="$D/broker-$b/disk/filler2" bs=4k 2>/dev/null || true
  if wait_dir_offline_after "$b" "$before"; then event "broker $b took the dir offline"
  else event "broker $b did not take the dir offline within 30 s"; fi
  sleep 2
  restart_after "$b" rm -f "$D/broker-$b/disk/filler" "$D/broker-$b/disk/filler2"
}

# Waits up to 30 s for broker $1's log to say a log dir went offline (skua's words and
# Kafka's), more often than the $2 times it had said so before.
wait_dir_offline_after() {
  local b=$1 before=$2 deadline=$((SECONDS + 30)) n
  while ((SECONDS < deadline)); do
    n=$(grep -ciE 'log dir is offline|Stopping serving (logs|replicas) in dir' "$D/broker-$b/server.log" || true)
    ((n > before)) && return 0
    sleep 1
  done
  return 1
}

# FS_IOC_SHUTDOWN: from now on every read, write and fsync on the file system fails with EIO,
# as on a disk that died; only an unmount and a new mount (journal replayed) repair it.
fs_shutdown() {
  python3 - "$1" <<'PY'
import fcntl, os, struct, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
FS_IOC_SHUTDOWN = 0x8004587D  # _IOR('X', 125, __u32)
fcntl.ioctl(fd, FS_IOC_SHUTDOWN, struct.pack("I", 2))  # NOLOGFLUSH: the journal is cut off
os.close(fd)
PY
}

repair_eio() {
  local b=$1
  umount "$D/broker-$b/disk" || umount -l "$D/broker-$b/disk"
  mount_disk "$b"
}

fault_disk_eio() {
  local b; b=$(disk_target)
  local before; before=$(grep -ciE 'log dir is offline|Stopping serving (logs|replicas) in dir' "$D/broker-$b/server.log" || true)
  event "broker $b's second log dir (holding: $(on_disk "$b")) fails: EIO on every read, write and fsync"
  fs_shutdown "$D/broker-$b/disk"
  if wait_dir_offline_after "$b" "$before"; then event "broker $b took the dir offline"
  else event "broker $b did not take the dir offline within 30 s"; fi
  sleep 2
  restart_after "$b" repair_eio "$b"
}

# The faults of each --nemesis kind: the ZooKeeper ensemble's, or with --kraft the
# controller quorum's in their place (kinds zk and ctl both name the mode's).
faults_of() {
  local iso=isolate_zk q1=zk_kill_one q2=zk_kill_two q3=zk_expire_controller q4=zk_expire_leader not=ctl
  if ((KRAFT)); then
    iso=isolate_ctl q1=ctl_kill_one q2=ctl_kill_two q3=ctl_kill_active q4=ctl_fence_leader not=zk
  fi
  case $1 in
    partition) echo isolate $iso isolate_clients split bridge asymmetric delay flap ;;
    zk|ctl) echo $q1 $q2 $q3 $q4 ;;
    disk) echo disk_full disk_eio ;;
    all) echo isolate $q2 disk_full $iso $q3 disk_eio split \
      $q1 isolate_clients $q4 bridge asymmetric delay flap ;;
    *)
      # Or a comma-separated list of the faults themselves (e.g. disk_full,isolate), each
      # of this mode (no ZooKeeper fault in a KRaft cluster, no controller's in the other).
      local f
      for f in ${1//,/ }; do
        declare -F "fault_$f" >/dev/null || return 1
        [[ $f != "$not"_* && $f != isolate_$not ]] || return 1
      done
      echo "${1//,/ }" ;;
  esac
}

# The schedule: the kind's faults in an order drawn from the seed, each once before any
# repeats (so a short run covers every fault of the kind), repeated to fill the rounds.
schedule() {
  local kind=$1 rounds=$2 all=() out=() f
  read -r -a all <<<"$(faults_of "$kind")"
  while ((${#out[@]} < rounds)); do
    local left=("${all[@]}")
    # `all` keeps its interleaved order in its first pass (a short run sees every kind).
    if [[ $kind == partition || $kind == zk || $kind == ctl || $kind == disk || ${#out[@]} -gt 0 ]]; then
      local i j t
      for ((i = ${#left[@]} - 1; i > 0; i--)); do
        j=$((RANDOM % (i + 1))); t=${left[i]}; left[i]=${left[j]}; left[j]=$t
      done
    fi
    for f in "${left[@]}"; do ((${#out[@]} < rounds)) && out+=("$f"); done
  done
  echo "${out[@]}"
}
