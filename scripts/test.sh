#!/usr/bin/env bash
# Run the whole test suite (pure logic, fake-trainer processes, real torch DDP and the real
# perforatedai example) in the project's environment. Extra arguments go to pytest, e.g.
# ./scripts/test.sh -m "not torch" for the fast tiers only.
# PAI_LAUNCH_DEPS=latest ./scripts/test.sh runs it against the newest release of every dependency
# instead of the pins in scripts/constraints.txt, in ./.venv-latest (see env.sh).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
pai_env_setup
cd "$PAI_ROOT"
exec "$PAI_VENV/bin/python" -m pytest -p no:cacheprovider -q -ra tests "$@"
