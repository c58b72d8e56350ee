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
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${needed[@]}" >/dev/null
}
