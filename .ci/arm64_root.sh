# An arm64 Python root with the image's lock for aarch64 (debootstrap), for the Graviton2
# (neoverse-n1) tests of tests/functional/image/test_cpus.py.
command -v debootstrap > /dev/null || apt_install debootstrap
if scripts/make_arm64_root.sh .arm64; then
    export SIGLIP_ARM64_ROOT="$PWD/.arm64/root" SIGLIP_ARM64_SITE="$PWD/.arm64/site"
else
    echo "NO ARM64 ROOT: the Graviton2 (neoverse-n1) tests skip, naming it"
fi
