#!/usr/bin/env bash
# An arm64 (aarch64) Python 3.13 root and the function image's lock for aarch64, to run the
# project under `qemu-aarch64-static -cpu neoverse-n1` (Graviton2, AWS Lambda's arm64) on an
# x86_64 machine: devkit/cpus.py and `siglip-text fidelity --cpu neoverse-n1`.
#
#   scripts/make_arm64_root.sh DIR        # DIR/root (Debian trixie arm64), DIR/site (wheels)
#
# Needs debootstrap, dpkg-deb, network (Debian mirror, PyPI) and a python3 with pip; no root
# (debootstrap --foreign only downloads and the .debs are unpacked with dpkg-deb -x).
# Then: SIGLIP_ARM64_ROOT=DIR/root SIGLIP_ARM64_SITE=DIR/site. Run as root, unshare -m and
# a bind mount show onnxruntime a Neoverse N1 /proc/cpuinfo (tests/fixtures), without which
# its CPU detection crashes on the host's x86 text.
set -euo pipefail
DIR="${1:?DIR}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
PIP="${PIP:-python3 -m pip}"
ROOT="$DIR/root"
SITE="$DIR/site"
HERE="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$DIR"
if [ ! -x "$ROOT/usr/bin/python3.13" ]; then
    DEBOOTSTRAP=debootstrap
    command -v debootstrap > /dev/null || DEBOOTSTRAP=/usr/sbin/debootstrap
    "$DEBOOTSTRAP" --arch=arm64 --foreign --variant=minbase \
        --include=python3,libpython3.13 trixie "$ROOT" "$MIRROR" > "$DIR/debootstrap.log"
    for deb in "$ROOT"/var/cache/apt/archives/*.deb; do dpkg-deb -x "$deb" "$ROOT"; done
fi
if [ ! -d "$SITE/onnxruntime" ]; then
    $PIP install --quiet --target "$SITE" --platform manylinux2014_aarch64 \
        --platform manylinux_2_28_aarch64 --only-binary=:all: --python-version 3.13 \
        --implementation cp --require-hashes --no-deps -r "$HERE/layers/python/requirements.txt"
fi
echo "arm64 root: $ROOT ($(ls "$ROOT"/usr/bin/python3.13)), site: $SITE" >&2
