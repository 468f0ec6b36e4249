#!/usr/bin/env bash
# The Debian package as a new user meets it (issue 36): a fresh Debian 12 root made by
# mmdebstrap from Debian's archive (chroot; /proc, /sys, /dev mounted, /run its own), the
# package installed there by apt (which must pull every dependency), then the reference
# quickstart scenario run from /usr/share/rocelab and `man rocelab-run` opened.
# Usage: sudo scripts/deb-check.sh [DEB]   (default: the newest build/rocelab_*.deb)
# Exit 0 when all of it works; the root is removed either way.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
deb=${1:-$(ls -t "$here"/build/rocelab_*.deb 2>/dev/null | head -1 || true)}
if [ -z "$deb" ] || [ ! -f "$deb" ]; then
  echo "deb-check: no package (cmake --build build --target package makes one)" >&2
  exit 4
fi
[ "$(id -u)" = 0 ] || { echo "deb-check: needs root (chroot, mounts, the fabric's namespaces)" >&2; exit 4; }
command -v mmdebstrap > /dev/null || { echo "deb-check: mmdebstrap is missing (scripts/setup.sh --package installs it)" >&2; exit 4; }
root=$(mktemp -d /var/tmp/rocelab-debroot.XXXXXX)
cleanup() {
  for m in run dev sys proc; do
    mountpoint -q "$root/$m" && umount -R -l "$root/$m" || true
  done
  rm -rf --one-file-system "$root"
}
trap cleanup EXIT
t0=$(date +%s)
mmdebstrap --variant=apt --quiet --include=man-db bookworm "$root" http://deb.debian.org/debian
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys"
mount --rbind /dev "$root/dev"
mount -t tmpfs -o mode=755 tmpfs "$root/run"
cp "$deb" "$root/tmp/"
in_root() { chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root DEBIAN_FRONTEND=noninteractive "$@"; }
echo "deb-check: Debian 12 root in $(( $(date +%s) - t0 )) s; apt install ./$(basename "$deb")"
in_root apt-get -q update > /dev/null
in_root apt-get -q install -y "/tmp/$(basename "$deb")" | grep -E "^(Setting up|The following NEW)" | head -3
in_root dpkg -s rocelab | grep -E "^(Version|Depends):"
in_root rocelab --version
in_root rocelab run --no-report --out /tmp/run /usr/share/rocelab/scenarios/quickstart.yaml
in_root sh -c 'MANPAGER=cat MANWIDTH=80 man rocelab-run | head -4'
echo "deb-check: passed in $(( $(date +%s) - t0 )) s"
