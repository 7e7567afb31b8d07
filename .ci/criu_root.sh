# A real SnapStart restore, emulated (tests/functional/snapstart/test_snapstart_criu*.py):
# Debian trixie's criu, unpacked under the checkout; the tests skip, naming why, where it
# cannot run.
command -v debootstrap > /dev/null || apt_install debootstrap
if scripts/make_criu_root.sh .criu; then
    export SIGLIP_CRIU_ROOT="$PWD/.criu/root"
else
    echo "NO CRIU ROOT: the SnapStart checkpoint tests skip, naming it"
fi
