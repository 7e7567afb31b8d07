# Other CPUs (docs/cpus.md; tests/functional/image/test_cpus.py and the arm64 image):
# qemu-user for AVX2 (-cpu Haswell), AVX (-cpu SandyBridge) and Graviton2 (-cpu neoverse-n1),
# and binfmt_misc running arm64 programs (containers included) through qemu-aarch64-static
# (the F flag: the interpreter is opened here, so it works inside any root). Sets ARM64_RUNS.
command -v qemu-aarch64-static > /dev/null || apt_install qemu-user-static
register_arm64() {
    local binfmt=/proc/sys/fs/binfmt_misc
    [ -e "$binfmt/register" ] || $SUDO mount -t binfmt_misc binfmt_misc "$binfmt" || return 1
    if [ -e "$binfmt/qemu-aarch64" ] && grep -q "flags: .*F" "$binfmt/qemu-aarch64" \
        && grep -q qemu-aarch64-static "$binfmt/qemu-aarch64"; then
        return 0
    fi
    [ -e "$binfmt/qemu-aarch64" ] && { echo -1 | $SUDO tee "$binfmt/qemu-aarch64" > /dev/null; }
    printf '%s' ':qemu-aarch64:M::\x7f\x45\x4c\x46\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00:\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff:/usr/bin/qemu-aarch64-static:F' \
        | $SUDO tee "$binfmt/register" > /dev/null
}
ARM64_RUNS=""
register_arm64 && ARM64_RUNS=1 || echo "binfmt_misc: cannot register qemu-aarch64 here: the arm64 image test skips"
