#!/usr/bin/env bash
# A real Slurm cluster (Slurm 22.05 from Debian: slurmctld, slurmd, slurm-client, munge) on loopback, for tests.
#
#   scripts/slurm/cluster.sh start DIR [--nodes 1|2]   start it; the last stdout line is `export SLURM_CONF=...`
#   scripts/slurm/cluster.sh stop DIR                  stop it (safe to repeat, safe when nothing runs)
#
# Everything lives in DIR: slurm.conf, gres.conf, fake GPU device files, state, spool, logs, a munge key and the
# daemons' PIDs (DIR/pids). Outside it: munge's socket, in a folder /tmp/pai-slurm-munge.* that stop removes, and,
# with two nodes, a line `127.0.0.1 node1 node2` in /etc/hosts (added once, when the names do not resolve) so that
# a rendezvous host taken from the node list resolves.
# --nodes 1 gives one node named `localhost`; --nodes 2 (the default) gives node1 and node2, two slurmd on this host
# with their own ports. One partition, `debug`, holds every node. No cgroups and no accounting: processes are
# tracked by proctrack/linuxproc, so stop also sweeps job processes that Slurm itself lost track of.
# Needs root (SlurmUser=root; munged runs as root too). Each cluster takes the first free block of ports from 6817
# up (slurmctld's, then one per slurmd), chosen under a lock held until its daemons listen, so two clusters (two test
# sessions on one host) run side by side.
set -euo pipefail
export PATH="$PATH:/usr/sbin:/sbin"  # the daemons live in sbin, which a non-login PATH may lack

FIRST_PORT=6817       # the first block's SlurmctldPort; its slurmd ports follow it (6818, 6819)
PORT_BLOCKS=50        # blocks tried, each nodes + 1 ports wide
PORT_LOCK=/tmp/pai-slurm-ports.lock
CTLD_PORT=            # this cluster's, chosen by start
START_TIMEOUT_S=60    # from launching the daemons to every node idle
STOP_GRACE_S=5        # SIGTERM, then SIGKILL after this long
GONE_TIMEOUT_S=10     # after SIGKILL

usage() {
    echo "usage: $0 start DIR [--nodes 1|2] | $0 stop DIR" >&2
    exit 2
}

die() {
    echo "cluster.sh: $*" >&2
    exit 1
}

# ---- processes -------------------------------------------------------------------------------------------------

# Alive and not a zombie: a daemon killed here may stay a zombie until its parent (the caller, when it is a
# subreaper such as the test session) reaps it, and that is as good as gone.
alive() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    [ "${stat%% *}" != Z ]
}

cmdline() {
    tr '\0' ' ' 2>/dev/null <"/proc/$1/cmdline" || true
}

# A PID from DIR/pids still belongs to this cluster only if its command line names DIR (PIDs get reused).
ours() {
    alive "$1" && [[ "$(cmdline "$1")" == *"$DIR/"* ]]
}

recorded() {  # recorded NAME-PATTERN: the live PIDs in DIR/pids whose name matches
    [ -f "$DIR/pids" ] || return 0
    local name pid
    while read -r name pid; do
        # shellcheck disable=SC2053  # the pattern is meant to match as a glob
        if [[ $name == $1 ]] && ours "$pid"; then echo "$pid"; fi
    done <"$DIR/pids"
}

# This script and its callers: never signalled, even if their environment names this cluster.
protected() {
    local pid=$$
    while [ "$pid" -gt 1 ]; do
        echo "$pid"
        pid=$(awk '/^PPid:/ {print $2}' "/proc/$pid/status" 2>/dev/null) || break
        [ -n "$pid" ] || break
    done
}

# Processes started for jobs of this cluster, found by their environment: slurmstepd inherits SLURM_CONF from
# slurmd, job processes from sbatch and add SLURM_JOB_ID. `steps` lists the slurmstepd, `tasks` everything else.
# linuxproc tracks jobs by parentage only, so a process that daemonized out of a job is found here, not by Slurm.
job_processes() {
    local kind=$1 keep file pid
    keep=" $(protected | tr '\n' ' ') "
    # One grep over every environment (NUL-separated variables, -z) instead of a process per PID.
    while read -r file; do
        pid=${file#/proc/}
        pid=${pid%/environ}
        [[ $keep == *" $pid "* ]] && continue
        alive "$pid" || continue
        if [[ "$(cmdline "$pid")" == slurmstepd* ]]; then
            [ "$kind" = steps ] && echo "$pid"
        elif grep -qz '^SLURM_JOB_ID=' "$file" 2>/dev/null; then
            [ "$kind" = tasks ] && echo "$pid"
        fi
    done < <(grep -lzxF "SLURM_CONF=$DIR/slurm.conf" /proc/[0-9]*/environ 2>/dev/null)
    return 0
}

# in_sessions SID...: the processes in those sessions (a job's processes share their slurmstepd's session, whatever
# their environment), this script and its callers excepted.
in_sessions() {
    [ $# -gt 0 ] || return 0
    local keep pid sid
    keep=" $(protected | tr '\n' ' ') "
    while read -r pid sid; do
        [[ $keep == *" $pid "* ]] && continue
        if [[ " $* " == *" $sid "* ]] && alive "$pid"; then echo "$pid"; fi
    done < <(ps -e -o pid=,sid=)
    return 0
}

# wait_gone SECONDS PID...: wait until every PID is gone; false if some are left (in $survivors) by then.
wait_gone() {
    local deadline=$((SECONDS + $1)) pid
    shift
    while :; do
        survivors=()
        for pid in "$@"; do
            if alive "$pid"; then survivors+=("$pid"); fi
        done
        [ ${#survivors[@]} -gt 0 ] || return 0
        [ $SECONDS -lt $deadline ] || return 1
        sleep 0.1
    done
}

# terminate SIGNAL PID...: send SIGNAL, SIGKILL to what is left after STOP_GRACE_S, and wait until all are gone.
terminate() {
    local sig=$1 pid
    shift
    [ $# -gt 0 ] || return 0
    kill -"$sig" "$@" 2>/dev/null || true
    wait_gone "$STOP_GRACE_S" "$@" && return 0
    kill -KILL "${survivors[@]}" 2>/dev/null || true
    wait_gone "$GONE_TIMEOUT_S" "${survivors[@]}" && return 0
    for pid in "${survivors[@]}"; do echo "cluster.sh: pid $pid survived SIGKILL: $(cmdline "$pid")" >&2; done
    return 1
}

stop_cluster() {
    local ok=0 steps sessions
    # shellcheck disable=SC2046,SC2086  # word splitting of PID lists is intended
    {
        # The controller first (nothing new gets scheduled), then the node daemons (no new steps), then the steps
        # and whatever their jobs left, and munge last (the others talk to it while shutting down).
        terminate TERM $(recorded slurmctld) || ok=1
        terminate TERM $(recorded 'slurmd*') || ok=1
        # SIGKILL for the steps: on SIGTERM they would wait KillWait for their tasks, and the tasks are next.
        steps=$(job_processes steps)
        sessions=$(for pid in $steps; do ps -o sid= -p "$pid" || true; done)
        terminate KILL $steps || ok=1
        terminate TERM $(job_processes tasks) $(in_sessions $sessions) || ok=1
        terminate TERM $(recorded munged) || ok=1
    }
    [ $ok -eq 0 ] || die "some processes of the cluster in $DIR would not stop"
    rm -f "$DIR/pids"
    # The munge socket's own folder (see start), only if it is the one start made.
    if [ -f "$DIR/munge/socket-dir" ]; then
        local socket_dir
        socket_dir=$(cat "$DIR/munge/socket-dir")
        [[ $socket_dir != /tmp/pai-slurm-munge.* ]] || rm -rf -- "$socket_dir"
        rm -f "$DIR/munge/socket-dir"
    fi
}

# ---- start -----------------------------------------------------------------------------------------------------

# port_user PORT: who listens on PORT ("pid N: COMMAND LINE"), or nothing when the port is free.
port_user() {
    local listener pid
    listener=$(ss -Hltnp "( sport = :$1 )" 2>/dev/null) || true
    [ -n "$listener" ] || return 0
    pid=$(grep -o 'pid=[0-9]*' <<<"$listener" | head -n 1) || true
    pid=${pid#pid=}
    if [ -n "$pid" ]; then echo "pid $pid: $(cmdline "$pid")"; else echo "$listener"; fi
}

# free_block NODES: the first port of the first block of NODES + 1 free ports from FIRST_PORT.
free_block() {
    local width=$(($1 + 1)) block port busy
    for block in $(seq 0 $((PORT_BLOCKS - 1))); do
        busy=
        for port in $(seq $((FIRST_PORT + block * width)) $((FIRST_PORT + block * width + width - 1))); do
            [ -z "$(port_user "$port")" ] || { busy=1; break; }
        done
        [ -n "$busy" ] || { echo $((FIRST_PORT + block * width)); return 0; }
    done
    return 1
}

# launch NAME COMMAND...: in the background, in its own session, output to DIR/log/NAME.out, PID to DIR/pids.
# (A background child of a non-interactive shell is no process group leader, so setsid execs in place and $! is the
# daemon itself.)
launch() {
    local name=$1
    shift
    setsid "$@" </dev/null >"$DIR/log/$name.out" 2>&1 &
    echo "$name $!" >>"$DIR/pids"
}

write_config() {  # write_config MUNGE-SOCKET NODES
    local socket=$1 nodes=$2 i
    {
        echo "# Written by scripts/slurm/cluster.sh: a test cluster on loopback."
        echo "ClusterName=pai-test"
        echo "SlurmctldHost=localhost"
        echo "SlurmctldPort=$CTLD_PORT"
        echo "AuthType=auth/munge"
        echo "CredType=cred/munge"
        echo "AuthInfo=socket=$socket"
        echo "SlurmUser=root"
        echo "SlurmdUser=root"
        echo "StateSaveLocation=$DIR/state"
        echo "SlurmdSpoolDir=$DIR/spool/%n"
        echo "SlurmctldPidFile=$DIR/run/slurmctld.pid"
        echo "SlurmdPidFile=$DIR/run/slurmd.%n.pid"
        echo "SlurmctldLogFile=$DIR/log/slurmctld.log"
        echo "SlurmdLogFile=$DIR/log/slurmd.%n.log"
        echo "# No cgroups, no accounting: works in a container and on any host."
        echo "ProctrackType=proctrack/linuxproc"
        echo "TaskPlugin=task/none"
        echo "JobAcctGatherType=jobacct_gather/none"
        echo "AccountingStorageType=accounting_storage/none"
        echo "JobCompType=jobcomp/none"
        echo "MpiDefault=none"
        echo "SelectType=select/cons_tres"
        echo "SelectTypeParameters=CR_Core"
        echo "# Batch jobs start on the scheduler's next 1 s tick, not up to 3 s later."
        echo "SchedulerParameters=batch_sched_delay=0"
        echo "# The nodes are what this file says, whatever the host has (no drain for 'low CPU count')."
        echo "SlurmdParameters=config_overrides"
        echo "# A node that was down comes back by itself; scancel: SIGTERM, SIGKILL 10 s later."
        echo "ReturnToService=2"
        echo "KillWait=10"
        echo "# Finished jobs stay visible to scontrol show job for 5 minutes; jobs may be requeued."
        echo "MinJobAge=300"
        echo "JobRequeue=1"
        echo "MailProg=/bin/true"
        echo "GresTypes=gpu"
        if [ "$nodes" -eq 1 ]; then
            echo "NodeName=localhost NodeAddr=127.0.0.1 Port=$((CTLD_PORT + 1))" \
                 "CPUs=4 RealMemory=4096 Gres=gpu:2 State=UNKNOWN"
        else
            for i in $(seq 1 "$nodes"); do
                echo "NodeName=node$i NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((CTLD_PORT + i))" \
                     "CPUs=4 RealMemory=4096 Gres=gpu:2 State=UNKNOWN"
            done
        fi
        echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=UNLIMITED State=UP"
    } >"$DIR/slurm.conf"
    # Empty regular files are enough for Slurm to count GPUs; every node uses the same two.
    : >"$DIR/dev/nvidia0"
    : >"$DIR/dev/nvidia1"
    echo "Name=gpu File=$DIR/dev/nvidia[0-1]" >"$DIR/gres.conf"
}

node_names() {
    if [ "$1" -eq 1 ]; then echo localhost; else seq -f 'node%g' 1 "$1"; fi
}

# node1/node2 resolve nowhere else; tests that take a rendezvous host from the node list need them.
add_hosts_entries() {
    local missing=() name
    for name in "$@"; do
        getent hosts "$name" >/dev/null || missing+=("$name")
    done
    [ ${#missing[@]} -eq 0 ] || echo "127.0.0.1 ${missing[*]}" >>/etc/hosts
}

# wait_for WHAT CHECK...: until CHECK succeeds, failing early if a recorded daemon died.
wait_for() {
    local what=$1 name pid
    shift
    while ! "$@" >/dev/null 2>&1; do
        while read -r name pid; do
            alive "$pid" || die "$name exited while waiting for $what; $DIR/log/$name.out says:
$(tail -n 20 "$DIR/log/$name.out" 2>/dev/null)"
        done <"$DIR/pids"
        [ $SECONDS -lt $START_DEADLINE ] || die "no $what after ${START_TIMEOUT_S} s; see the logs in $DIR/log"
        sleep 0.1
    done
}

all_idle() {
    local states
    states=$(sinfo -h -N -o '%N %T' | sort -u)
    [ "$(grep -c ' idle$' <<<"$states")" -eq "$1" ]
}

# If start fails half-way, stop what it started and show what the controller said.
on_start_exit() {
    local rc=$?
    trap - EXIT
    if [ $rc -ne 0 ]; then
        if [ -f "$DIR/log/slurmctld.log" ]; then
            { echo "--- $DIR/log/slurmctld.log (tail)"; tail -n 20 "$DIR/log/slurmctld.log"; } >&2
        fi
        (stop_cluster) || true
        echo "cluster.sh: start failed; the cluster is stopped" >&2
    fi
    exit $rc
}

start_cluster() {
    local nodes=$1 tool name socket_dir lock_fd
    [ "$(id -u)" -eq 0 ] || die "needs root (SlurmUser=root; munged runs as root too)"
    for tool in munged mungekey slurmctld slurmd sinfo scontrol ss; do
        command -v "$tool" >/dev/null || die "$tool not found: apt-get install slurmctld slurmd slurm-client munge"
    done
    [ -z "$(recorded '*')" ] || die "a cluster is already running in $DIR; stop it first: $0 stop $DIR"
    # The first block of free ports, under a lock that another start waits for until this cluster's daemons listen.
    exec {lock_fd}>"$PORT_LOCK"
    flock "$lock_fd"
    CTLD_PORT=$(free_block "$nodes") || die "no $((nodes + 1)) free ports from $FIRST_PORT in $PORT_BLOCKS blocks" \
        "(the last one's user: $(port_user $((FIRST_PORT + PORT_BLOCKS * (nodes + 1) - 1))))"

    mkdir -p "$DIR"/{state,spool,run,log,dev,munge}
    rm -f "$DIR/pids" "$DIR"/log/*  # a new cluster, new logs
    chown root:root "$DIR/munge"    # munged checks its folders' owner and mode
    chmod 700 "$DIR/munge"
    trap on_start_exit EXIT
    START_DEADLINE=$((SECONDS + START_TIMEOUT_S))
    # munged wants every folder above its socket open to all (x), which a private DIR (pytest's tmp folders are
    # 0700) is not: the socket gets a short folder of its own in /tmp, removed by stop.
    socket_dir=$(mktemp -d /tmp/pai-slurm-munge.XXXXXX)
    chmod 711 "$socket_dir"
    echo "$socket_dir" >"$DIR/munge/socket-dir"
    write_config "$socket_dir/munge.socket" "$nodes"
    # shellcheck disable=SC2046  # one name a word
    [ "$nodes" -eq 1 ] || add_hosts_entries $(node_names "$nodes")
    # Exported for the clients below and inherited by the daemons, slurmstepd included: stop finds the steps by it.
    export SLURM_CONF="$DIR/slurm.conf"
    cd "$DIR"  # the daemons' working folder, not the caller's

    # munged runs as root (like the rest of the cluster) with a key of this cluster, so it can read DIR.
    [ -f "$DIR/munge/munge.key" ] || mungekey --create --keyfile="$DIR/munge/munge.key"
    launch munged munged --foreground --socket="$socket_dir/munge.socket" --key-file="$DIR/munge/munge.key" \
        --pid-file="$DIR/munge/munged.pid" --log-file="$DIR/munge/munged.log" --seed-file="$DIR/munge/munged.seed"
    wait_for "munge socket" bash -c "munge -n -S '$socket_dir/munge.socket' | unmunge -S '$socket_dir/munge.socket'"

    # -c: no jobs from an earlier cluster in DIR (job ids keep counting, though).
    launch slurmctld slurmctld -D -c -f "$DIR/slurm.conf"
    wait_for "slurmctld answering" scontrol ping
    for name in $(node_names "$nodes"); do
        launch "slurmd.$name" slurmd -D -N "$name" -f "$DIR/slurm.conf"
    done
    wait_for "every node idle" all_idle "$nodes"
    flock --unlock "$lock_fd"  # its ports are taken now: the next start sees them in use

    trap - EXIT
    sinfo -N >&2
    echo "export SLURM_CONF=$DIR/slurm.conf"
}

# ---- main ------------------------------------------------------------------------------------------------------

[ $# -ge 2 ] || usage
command=$1
folder=$2
shift 2
nodes=2
case $command in
    start)
        while [ $# -gt 0 ]; do
            case $1 in
                --nodes) [ $# -ge 2 ] || usage; nodes=$2; shift 2 ;;
                --nodes=*) nodes=${1#--nodes=}; shift ;;
                *) usage ;;
            esac
        done
        [[ $nodes == 1 || $nodes == 2 ]] || die "--nodes must be 1 or 2, not $nodes"
        mkdir -p "$folder"
        ;;
    stop)
        [ $# -eq 0 ] || usage
        [ -d "$folder" ] || exit 0  # never started there: nothing to stop
        ;;
    *) usage ;;
esac
DIR=$(cd "$folder" && pwd -P)  # absolute and without symlinks: it is matched against command lines
if [ "$command" = start ]; then start_cluster "$nodes"; else stop_cluster; fi
