#!/usr/bin/env bash
# Debian trixie's criu (4.1), for the SnapStart test that checkpoints and restores a function
# process (tests/functional/snapstart/test_snapstart_criu.py). Debian 12's criu 3.17 fails on recent
# kernels ("vdso: Unexpected rt vDSO area bounds"); trixie's runs on the host through the
# root's own loader (devkit/snapstart.py, criu_command):
#
#   scripts/make_criu_root.sh DIR        # DIR/root; then SIGLIP_CRIU_ROOT=DIR/root
#
# Needs debootstrap, dpkg-deb and network (Debian mirror); no root: debootstrap --foreign only
# downloads, and the .debs are unpacked with dpkg-deb -x. Checkpointing itself needs root.
set -euo pipefail
DIR="${1:?DIR}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
ROOT="$DIR/root"
mkdir -p "$DIR"
if [ ! -x "$ROOT/usr/sbin/criu" ]; then
    DEBOOTSTRAP=debootstrap
    command -v debootstrap > /dev/null || DEBOOTSTRAP=/usr/sbin/debootstrap
    "$DEBOOTSTRAP" --arch=amd64 --foreign --variant=minbase --include=criu trixie "$ROOT" \
        "$MIRROR" > "$DIR/debootstrap.log"
    for deb in "$ROOT"/var/cache/apt/archives/*.deb; do dpkg-deb -x "$deb" "$ROOT"; done
    rm -f "$ROOT"/var/cache/apt/archives/*.deb
fi
echo "criu root: $ROOT ($("$ROOT/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" \
    --library-path "$ROOT/usr/lib/x86_64-linux-gnu" "$ROOT/usr/sbin/criu" --version | head -1))" >&2
