#!/usr/bin/env bash
# Install what is missing, build, and run every test tier (unit, bpf, integration, vm).
# Tiers that need root skip with a reason when not run as root; CI runs as root.
# Extra arguments go to ctest, e.g. scripts/test.sh -L unit
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
cd "${BUILD_DIR:-build}"
exec ctest --output-on-failure -j "$(nproc)" "$@"
