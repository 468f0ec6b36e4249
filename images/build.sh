#!/usr/bin/env bash
# The VM image for real soft-RoCE (DESIGN.md "Real rxe"), from Debian packages only:
# Debian 12's generic amd64 6.12 kernel (bookworm-security; not cloud-amd64, which lacks
# rdma_rxe) and an initramfs holding only what rxe and perftest need: busybox-static, kmod,
# iproute2 (whose `rdma` adds rxe links), ibverbs-providers (librxe), perftest,
# rdmacm-utils and their libraries. Packages are unpacked (dpkg-deb -x), never installed:
# nothing runs as root on this machine but apt-get download.
#
# Usage: images/build.sh [--rocelab BIN] [OUT_DIR]   (default images/out; ~70 MB downloaded once)
# --rocelab puts that rocelab binary in the image as /usr/bin/rocelab, with the Debian
# packages of the libraries it links (found through ldd and dpkg -S on this machine), and
# Slurm's (munge, slurmctld, slurmd, slurm-client): guests that start a split run by srun.
# Writes OUT_DIR/{vmlinuz, initrd.img, manifest.txt}; manifest.txt lists every package and
# version that went in. ROCELAB_VM_KERNEL=6.12.115+deb12-amd64 pins the kernel (default: the
# newest 6.12 the archive offers). Idempotent: an OUT_DIR whose manifest matches is kept.
#
# The guest: /init mounts the host directory shared as 9p tag `job`, runs its job.sh (with
# busybox sh: call ip, modprobe and sysctl by full path, /usr/bin/ip, as busybox's applets
# shadow them) with the output in job.log and the exit code in job.rc, and powers off.
# rocelab's run/vm.cc and tests/vm/ boot it.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
rocelab=""
if [ "${1:-}" = "--rocelab" ]; then
  rocelab=$(readlink -f "${2:?--rocelab needs the binary}")
  shift 2
fi
out=${1:-$here/out}
for tool in apt-get apt-cache dpkg-deb cpio gzip depmod; do
  command -v "$tool" >/dev/null || { echo "images/build.sh: needs $tool" >&2; exit 4; }
done

kver=${ROCELAB_VM_KERNEL:-$(apt-cache search --names-only '^linux-image-6\.12\.[0-9]+\+deb12-amd64-unsigned$' |
  awk '{print $1}' | sed 's/^linux-image-//; s/-unsigned$//' | sort -V | tail -1)}
if [ -z "$kver" ]; then
  echo "images/build.sh: no linux-image-6.12.*+deb12-amd64-unsigned in apt's lists (bookworm-security; apt-get update?)" >&2
  exit 4
fi
userland=(busybox-static kmod iproute2 ibverbs-providers perftest rdmacm-utils)
if [ -n "$rocelab" ]; then
  # A Slurm cluster of the guests (issue 37): munge, the controller, the node daemon, srun.
  userland+=(munge slurmctld slurmd slurm-client)
  # Each library the binary links, as the package that ships it (merged /usr: try both paths).
  while read -r lib; do
    real=$(readlink -f "$lib")
    pkg=""
    for cand in "$real" "${real#/usr}" "/usr$real" "$lib"; do
      pkg=$(dpkg -S "$cand" 2>/dev/null | head -1 | cut -d: -f1) && [ -n "$pkg" ] && break
    done
    [ -n "$pkg" ] || { echo "images/build.sh: no Debian package ships $lib (linked by $rocelab)" >&2; exit 4; }
    userland+=("$pkg")
  done < <(ldd "$rocelab" | awk '$3 ~ /^\// {print $3}')
fi
# Packages whose files nothing in the guest uses (maintainer tooling, PAM, the installer).
skip='^(debconf|cdebconf|dpkg|adduser|passwd|install-info|tar|libpam-.*|libdebian-installer4|libnewt0\.52|libslang2|libtextwrap1|libsemanage.*)$'
mapfile -t pkgs < <(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
  --no-replaces --no-enhances "${userland[@]}" | grep -v '^ ' | grep -v '^<' | sort -u | grep -Ev "$skip")
pkgs+=("linux-image-$kver-unsigned")

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/debs" "$work/root"
chmod 755 "$work"
chown _apt "$work/debs" 2>/dev/null || true  # apt downloads as _apt where it can
echo "images/build.sh: kernel $kver, ${#pkgs[@]} packages"
(cd "$work/debs" && apt-get download -qq "${pkgs[@]}")
: > "$work/manifest.txt"
for deb in "$work"/debs/*.deb; do
  dpkg-deb -f "$deb" Package Version | paste -sd' ' >> "$work/manifest.txt"
done
sort -o "$work/manifest.txt" "$work/manifest.txt"
[ -z "$rocelab" ] || echo "rocelab $(sha256sum "$rocelab" | cut -c1-16)" >> "$work/manifest.txt"
# This script too: an image made by an older recipe is made again.
echo "images/build.sh $(sha256sum "$0" | cut -c1-16)" >> "$work/manifest.txt"
if [ -f "$out/manifest.txt" ] && [ -f "$out/vmlinuz" ] && [ -f "$out/initrd.img" ] && cmp -s "$work/manifest.txt" "$out/manifest.txt"; then
  echo "images/build.sh: $out is up to date"
  exit 0
fi
for deb in "$work"/debs/*.deb; do dpkg-deb -x "$deb" "$work/root"; done
root=$work/root
mkdir -p "$out"
cp "$root/boot/vmlinuz-$kver" "$out/vmlinuz.new"

# Only the modules rxe, veth and the 9p share need, with what they depend on (rxe's ICRC
# asks the crypto API for crc32, a module no dependency names; virtio_pci may be one too),
# and virtio_net with vxlan for a fabric split over two guests (a NIC on the underlay, the
# cut links' ports).
depmod -b "$root" "$kver"
# With rocelab in the image, its qdiscs and classifiers too (the kernel loads them on demand).
sched=""
[ -z "$rocelab" ] || sched=$(cd "$root/lib/modules/$kver/kernel/net/sched" && ls | sed 's/\.ko.*$//' | tr '\n' ' ')
# shellcheck disable=SC2086
mods=$(modprobe -a -d "$root" -S "$kver" --show-depends virtio_pci rdma_rxe crc32_generic crc32_pclmul veth 9p 9pnet_virtio virtio_net vxlan $sched 2>/dev/null | awk '$1 == "insmod" {print $2}')
[ -n "$mods" ] || { echo "images/build.sh: modprobe found no rdma_rxe in $kver" >&2; exit 4; }
keep=$work/keep
mkdir -p "$keep/lib/modules/$kver"
cp "$root/lib/modules/$kver"/modules.{order,builtin,builtin.modinfo} "$keep/lib/modules/$kver/" 2>/dev/null || true
for m in $mods; do
  rel=${m#"$root"}
  mkdir -p "$keep$(dirname "$rel")"
  cp "$m" "$keep$rel"
done
rm -rf "$root/lib/modules" "$root/boot" "$root/usr/share/doc" "$root/usr/share/man" "$root/usr/share/locale"
mkdir -p "$root/lib/modules"
cp -a "$keep/lib/modules/$kver" "$root/lib/modules/"
depmod -b "$root" "$kver"

# Debian 12 merges /usr: the image's /bin, /sbin, /lib point into /usr as the packages expect.
for d in bin sbin lib lib64; do
  if [ -d "$root/$d" ] && [ ! -L "$root/$d" ]; then
    mkdir -p "$root/usr/$d"
    cp -a "$root/$d/." "$root/usr/$d/"
    rm -rf "${root:?}/$d"
  fi
  [ -e "$root/usr/$d" ] && ln -sfn "usr/$d" "$root/$d"
done
mkdir -p "$root"/{proc,sys,dev,tmp,run,job,etc}
echo "root:x:0:0:root:/root:/bin/sh" > "$root/etc/passwd"
echo "root:x:0:" > "$root/etc/group"
echo "hosts: files dns" > "$root/etc/nsswitch.conf"
# /bin/sh, as scripts expect it (Slurm's epilog, srun's `sh -c`): busybox's.
[ -e "$root/usr/bin/sh" ] || ln -s busybox "$root/usr/bin/sh"
# Slurm's daemons by the names update-alternatives gives them on an installed system
# (slurmd starts slurmstepd by that name).
for f in "$root"/usr/sbin/slurm*-wlm; do
  [ -e "$f" ] && ln -sfn "$(basename "$f")" "${f%-wlm}"
done
[ -z "$rocelab" ] || install -m 755 "$rocelab" "$root/usr/bin/rocelab"
cat > "$root/init" <<'EOF'
#!/usr/bin/busybox sh
# rocelab's VM: run the host's job (9p tag `job`), keep its output and exit code, power off.
bb=/usr/bin/busybox
$bb mount -t proc proc /proc
$bb mount -t sysfs sys /sys
$bb mount -t devtmpfs dev /dev
$bb mount -t tmpfs tmp /tmp
$bb mount -t tmpfs run /run
$bb mount -t bpf bpf /sys/fs/bpf 2>/dev/null
$bb mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null  # slurmd will not start without it
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
# This machine is the testbed's own: rxe hosts may live in its init namespace (before 7.1
# rxe works nowhere else), which rocelab refuses to do to anybody else's.
export ROCELAB_DEDICATED_MACHINE=1
# Full paths: busybox sh runs its own applets (modprobe, ip) before anything on PATH, and
# they lack what kmod (xz modules) and iproute2 (rules by oif) have.
/usr/sbin/modprobe -a virtio_pci 9pnet_virtio 9p veth crc32_generic crc32_pclmul rdma_rxe virtio_net 2>/dev/null
/usr/bin/ip link set lo up
if $bb mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 job /job && [ -x /job/job.sh ]; then
  $bb sh /job/job.sh > /job/job.log 2>&1
  echo $? > /job/job.rc
  $bb sync
else
  echo "rocelab vm: no job (9p tag 'job' with job.sh)" > /dev/console
fi
$bb poweroff -f
EOF
chmod 755 "$root/init"
(cd "$root" && find . -print0 | cpio --null -o -H newc --quiet | gzip -1) > "$out/initrd.img.new"
mv "$out/vmlinuz.new" "$out/vmlinuz"
mv "$out/initrd.img.new" "$out/initrd.img"
cp "$work/manifest.txt" "$out/manifest.txt"
echo "images/build.sh: wrote $out/vmlinuz, $out/initrd.img ($(du -h "$out/initrd.img" | cut -f1)), $out/manifest.txt"
