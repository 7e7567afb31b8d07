# A Docker engine: the one running, or dockerd started here (installed if missing), its data
# under /tmp. `sam local` publishes its emulator's port to the host, which needs a bridge
# network: without iptables, Docker's userland proxy still forwards published ports, so the
# engine gets a bridge of its own (made with `ip link`, its own subnet, so that several
# engines on one machine never share one) and no NAT: containers get no network, builds use
# the host's. One engine per checkout (its data is the build cache), so that two CI runs in
# two clones never stop each other's engine. Sets DOCKER_RUNS where an engine answers.
CHECKOUT_ID="$(pwd | sha1sum | cut -c1-8)"
DOCKER_DIR="${SIGLIP_DOCKER_DIR:-/tmp/siglip-text-docker-$CHECKOUT_ID}"
BRIDGE="${SIGLIP_DOCKER_BRIDGE:-sigbr$CHECKOUT_ID}"
STARTED_DOCKERD=""
MADE_BRIDGE=""
DOCKER_RUNS=""
make_bridge() {
    ip link show "$BRIDGE" > /dev/null 2>&1 && return 0
    command -v ip > /dev/null || apt_install iproute2 || return 1
    # a /24 of 172.29.0.0/16 that no interface of this machine uses yet
    local n=$(( 0x${CHECKOUT_ID:0:4} % 200 + 20 ))
    while ip -4 addr show | grep -q "inet 172\.29\.$n\."; do n=$(( n % 250 + 1 )); done
    $SUDO ip link add "$BRIDGE" type bridge \
        && $SUDO ip addr add "${SIGLIP_DOCKER_SUBNET:-172.29.$n.1/24}" dev "$BRIDGE" \
        && $SUDO ip link set "$BRIDGE" up && MADE_BRIDGE=1
}
start_docker_engine() {
    docker info > /dev/null 2>&1 && return 0
    command -v dockerd > /dev/null || apt_install docker.io || return 1
    mkdir -p "$DOCKER_DIR"
    export DOCKER_HOST="unix://$DOCKER_DIR/docker.sock"
    docker info > /dev/null 2>&1 && return 0
    make_bridge || { echo "no bridge for the Docker engine: sam local cannot publish ports" >&2; return 1; }
    $SUDO dockerd --iptables=false --ip6tables=false --bridge="$BRIDGE" \
        --data-root "$DOCKER_DIR/data" --exec-root "$DOCKER_DIR/exec" \
        --pidfile "$DOCKER_DIR/dockerd.pid" \
        --host "$DOCKER_HOST" > "$DOCKER_DIR/dockerd.log" 2>&1 &
    STARTED_DOCKERD=$!
    for _ in $(seq 60); do
        docker info > /dev/null 2>&1 && return 0
        kill -0 "$STARTED_DOCKERD" 2> /dev/null || break
        sleep 1
    done
    tail -5 "$DOCKER_DIR/dockerd.log" >&2
    return 1
}
stop_docker_engine() {
    if [ -n "$STARTED_DOCKERD" ]; then
        $SUDO kill "$STARTED_DOCKERD" 2> /dev/null || true
        wait "$STARTED_DOCKERD" 2> /dev/null || true
    fi
    if [ -n "$MADE_BRIDGE" ]; then
        $SUDO ip link delete "$BRIDGE" 2> /dev/null || true
    fi
}
trap stop_docker_engine EXIT
if start_docker_engine; then
    DOCKER_RUNS=1
    echo "Docker engine: $(docker version --format '{{.Server.Version}}')"
else
    echo "NO DOCKER ENGINE could run here: tests/functional/image/test_image.py falls back to pip --target + python -m awslambdaric behind the RIE on this machine (the Dockerfile is not built); tests/functional/image/test_sam_local.py fails in CI"
fi
