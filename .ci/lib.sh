# What the steps share: sudo where CI is not root, apt-get for what a step installs, and
# `step NAME SCRIPT`, which runs a step's script in this shell (its exports and functions
# stay for the later steps) and says how long it took.
SUDO=""
if [ "$(id -u)" != 0 ] && command -v sudo > /dev/null; then SUDO="sudo -n"; fi
apt_install() {
    $SUDO apt-get update -qq > /dev/null && \
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@" > /dev/null
}
STEP_TIMES=""
step() {
    local name="$1" script="$2" started=$SECONDS
    echo "==> $name ($script)"
    # shellcheck source=/dev/null
    . "$script"
    STEP_TIMES="$STEP_TIMES$(printf '%-22s %5d s' "$name" $((SECONDS - started)))"$'\n'
}
