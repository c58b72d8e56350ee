# Sourced by test.sh: the system tools some test tiers need, installed with apt-get where this user may (root, or
# sudo without a password); otherwise one line says what is missing and how to install it, and those tiers are
# skipped with that reason (PAI_LAUNCH_ALL_TIERS=1, which .ci/run sets, turns every skip into a failure).
#
# systemd (systemd-analyze lints the shipped unit), podman, runc, catatonit and debootstrap (tests/container builds
# the Dockerfile and runs the image), slurmctld, slurmd, slurm-client and munge (tests/slurm runs a real Slurm
# cluster on loopback), iproute2 (`ip netns`: two hosts for the multi-node tests), util-linux (`unshare`: PID 1 and
# PID-namespace tests), prometheus (promtool checks the shipped alert rules). PAI_LAUNCH_SYSTEM_TOOLS=skip leaves the
# system alone.

pai_system_tools() {
    local needed=() tool_package
    command -v systemd-analyze >/dev/null 2>&1 || needed+=(systemd)
    for tool_package in podman:podman runc:runc debootstrap:debootstrap slurmctld:slurmctld slurmd:slurmd \
            sinfo:slurm-client munged:munge ip:iproute2 unshare:util-linux promtool:prometheus; do
        PATH="$PATH:/usr/sbin:/sbin" command -v "${tool_package%%:*}" >/dev/null 2>&1 || needed+=("${tool_package#*:}")
    done
    [ -e /usr/libexec/podman/catatonit ] || command -v catatonit >/dev/null 2>&1 || needed+=(catatonit)
    [ ${#needed[@]} -eq 0 ] && return 0
    local sudo=""
    if [ "${PAI_LAUNCH_SYSTEM_TOOLS:-install}" = skip ] || ! command -v apt-get >/dev/null 2>&1; then
        sudo=none
    elif [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo=sudo; else sudo=none; fi
    fi
    if [ "$sudo" = none ]; then
        echo "test.sh: ${needed[*]} missing: install them (sudo apt-get install ${needed[*]}) or the tiers that need them are skipped" >&2
        return 0
    fi
    echo "test.sh: installing ${needed[*]} (apt-get) for the tiers that need them" >&2
    pai_apt_get "$sudo" update -qq
    DEBIAN_FRONTEND=noninteractive pai_apt_get "$sudo" install -y -qq --no-install-recommends "${needed[@]}" >/dev/null
}

# pai_apt_get SUDO ARGS...: apt-get ARGS (as SUDO, or "" for none), waiting for the package manager's locks instead
# of failing at once (exit 100) while another apt-get or unattended-upgrades holds them, as on a machine that has
# just booted. DPkg::Lock::Timeout makes apt wait for the
# dpkg lock itself; apt-get update does not honour it for the lists lock, so a lock failure is retried until
# PAI_APT_LOCK_WAIT seconds (default 600) have passed, with a line saying who holds it.
pai_apt_get() {
    local sudo="$1" wait="${PAI_APT_LOCK_WAIT:-600}" poll="${PAI_APT_LOCK_POLL:-5}" start=$SECONDS err rc
    shift
    err="$(mktemp)"
    while true; do
        rc=0
        $sudo apt-get -o "DPkg::Lock::Timeout=$wait" "$@" 2>"$err" || rc=$?
        if [ "$rc" -eq 0 ] || ! grep -q "Could not get lock" "$err" || [ $((SECONDS - start)) -ge "$wait" ]; then
            cat "$err" >&2
            rm -f "$err"
            return "$rc"
        fi
        echo "test.sh: waiting for the package manager's lock ($(grep -m1 "Could not get lock" "$err"))" >&2
        sleep "$poll"
    done
}
