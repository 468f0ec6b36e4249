#!/usr/bin/env bash
# The newcomer's first command: install what is missing, build, run the default scenario.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
SCENARIO=${1:-scenarios/quickstart.yaml}
echo "== rocelab run $SCENARIO"
exec build/rocelab run "$SCENARIO"
