#!/usr/bin/env bash
# Run the whole test suite (pure logic, fake-trainer processes, real torch DDP and the real perforatedai example,
# the container image, a real Slurm cluster, other torch and Python versions) in the project's environment.
# It first installs the system tools some tiers need (scripts/system_tools.sh: apt-get as root or with sudo; else it
# says in one line what to install, and those tiers are skipped with that reason).
# Extra arguments go to pytest, e.g. ./scripts/test.sh -m "not torch" for the fast tiers only.
# PAI_LAUNCH_DEPS=latest ./scripts/test.sh runs it against the newest release of every dependency
# instead of the pins in scripts/constraints.txt, in ./.venv-latest (see env.sh).
# PAI_LAUNCH_ALL_TIERS=1 (what CI sets) makes a skipped test a failure: every tier must run.
# The tests run in two pytest-xdist workers (about 34 minutes instead of about 55 in one process on a 2-core machine:
# most tests wait on processes, not on a core); tests sharing one thing on the machine (the Slurm cluster, the image,
# the torch environments) stay in one worker (tests/conftest.py's SHARED_GROUPS). PAI_LAUNCH_TEST_WORKERS=N sets
# another count; 0 runs them in this process.
set -euo pipefail
here="$(dirname "${BASH_SOURCE[0]}")"
source "$here/env.sh"
source "$here/system_tools.sh"
pai_system_tools
pai_env_setup
cd "$PAI_ROOT"
exec "$PAI_VENV/bin/python" -m pytest -p no:cacheprovider -q -ra -n "${PAI_LAUNCH_TEST_WORKERS:-2}" \
    tests "$@"
