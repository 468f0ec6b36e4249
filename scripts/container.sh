#!/usr/bin/env bash
# Builds the container image rocelab:latest (and rocelab:VERSION) from the Debian package:
# packaging/Containerfile on Debian 12. The base comes from a registry when one answers,
# else from Debian's archive (mmdebstrap, imported once as localhost/rocelab-debian:bookworm).
# Usage: sudo scripts/container.sh [--check] [DEB]   (default: the newest build/rocelab_*.deb;
#        cmake --build build --target package makes one). --check then runs the quickstart
#        scenario in the image, privileged, to a pass.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
check=0
if [ "${1:-}" = "--check" ]; then check=1; shift; fi
deb=${1:-$(ls -t "$here"/build/rocelab_*.deb 2>/dev/null | head -1 || true)}
if [ -z "$deb" ] || [ ! -f "$deb" ]; then
  echo "container.sh: no package (cmake --build build --target package makes one)" >&2
  exit 4
fi
for tool in podman mmdebstrap; do
  command -v "$tool" > /dev/null || { echo "container.sh: $tool is missing (scripts/setup.sh --package installs it)" >&2; exit 4; }
done
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
cp "$deb" "$ctx/rocelab.deb"
base=docker.io/library/debian:bookworm
if ! podman image exists "$base" && ! timeout 60 podman pull -q "$base" > /dev/null 2>&1; then
  base=localhost/rocelab-debian:bookworm
  if ! podman image exists "$base"; then
    echo "container.sh: no registry answers; Debian 12 from Debian's archive (mmdebstrap)" >&2
    mmdebstrap --variant=apt --quiet bookworm "$ctx/base.tar" http://deb.debian.org/debian
    podman import --quiet "$ctx/base.tar" "$base" > /dev/null
  fi
fi
version=$(dpkg-deb -f "$deb" Version)
podman build --quiet --isolation chroot --build-arg BASE="$base" -t "localhost/rocelab:${version//+/_}" -t localhost/rocelab:latest \
  -f "$here/packaging/Containerfile" "$ctx"
echo "container.sh: localhost/rocelab:latest (${version}) from $base"
[ "$check" = 1 ] || exit 0
# Where crun refuses the host's cgroups (hybrid v1/v2, as here) runc runs it; where podman
# may not raise its default rlimits (no CAP_SYS_RESOURCE, as in this sandbox) the
# container keeps the caller's. A normal host needs neither.
runtime=()
if command -v runc > /dev/null; then runtime=(--runtime runc); fi
printf '[containers]\ndefault_ulimits = []\n' > "$ctx/containers.conf"
mkdir -p "$ctx/runs"
CONTAINERS_CONF="$ctx/containers.conf" podman "${runtime[@]}" run --rm --privileged -v "$ctx/runs:/work/runs" \
  localhost/rocelab:latest run --retry-invalid --no-report --out /work/runs/quickstart /usr/share/rocelab/scenarios/quickstart.yaml
test -s "$ctx/runs/quickstart/junit.xml"
echo "container.sh: the quickstart scenario passed in the image"
