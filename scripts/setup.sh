#!/usr/bin/env bash
# Installs what rocelab needs to build and test, from Debian 12 / Ubuntu 24.04 packages.
# Idempotent: installs only what is missing; apt runs only when something is.
set -euo pipefail

# Build and run-time dependencies (the library's -dev packages pull their runtime parts).
PKGS=(
  build-essential cmake pkg-config ninja-build
  clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev libdeflate-dev
  libnl-3-dev libnl-route-3-dev libpcap-dev libssl-dev prometheus-cpp-dev libibverbs-dev
  libboost-program-options-dev libspdlog-dev libfmt-dev libyaml-cpp-dev
  nlohmann-json3-dev libgtest-dev libgmock-dev
  iproute2 python3 tcpdump tshark
  graphviz jq                 # the README's examples pipe into dot and jq
  libjs-chart.js gnuplot-nox  # report.html inlines Chart.js; plots/*.svg through gnuplot
  chromium                    # the report's test renders it headless (Debian's; Ubuntu's is a snap)
  qemu-system-x86 cpio kmod   # the VM image (images/build.sh) and the vm test tier
  mmdebstrap lintian          # the package test: apt installs the .deb into a fresh Debian 12 root
  python3-kubernetes python3-yaml  # the k8s test validates rocelab k8s's manifests with the API's models
)
# `setup.sh --bench` adds what bench/ compares against (Mininet with Linux bridges) and the
# CPU hog bench/verdicts runs scenarios beside (stress-ng).
if [ "${1:-}" = "--bench" ]; then
  PKGS+=(mininet bridge-utils stress-ng)
fi
# `setup.sh --package` adds podman, which builds and runs the container image
# (scripts/container.sh).
if [ "${1:-}" = "--package" ]; then
  PKGS+=(podman)
fi
# Ubuntu ships bpftool inside linux-tools; Debian as its own package.
if grep -qi ubuntu /etc/os-release 2>/dev/null; then
  PKGS=("${PKGS[@]/bpftool/linux-tools-common}")
  keep=()
  for p in "${PKGS[@]}"; do [ "$p" = chromium ] || keep+=("$p"); done  # a snap there: the report test skips, saying why
  PKGS=("${keep[@]}")
fi

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#PKGS[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 4; }
  SUDO="sudo"
fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
