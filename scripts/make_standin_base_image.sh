#!/usr/bin/env bash
# A local STAND-IN for AWS's Lambda base image public.ecr.aws/lambda/python:3.13, for machines
# that cannot pull from a container registry (CI here). It lets the project's unchanged
# handler/Dockerfile build and run under AWS's own runtime pieces. It is not AWS's image:
# never push it, never deploy an image built on it.
#
#   sudo scripts/make_standin_base_image.sh [TAG]      # TAG: public.ecr.aws/lambda/python:3.13
#   sudo SIGLIP_IMAGE_ARCH=arm64 scripts/make_standin_base_image.sh   # TAG: ...:3.13-arm64
#   scripts/make_standin_base_image.sh --host-runtime DIR
#
# SIGLIP_IMAGE_ARCH=arm64 on an x86_64 machine makes the linux/arm64 stand-in (AWS publishes
# the same tag, public.ecr.aws/lambda/python:3.13-arm64): debootstrap runs the arm64 root's
# programs through qemu-aarch64-static, registered in binfmt_misc with the F flag (docs/cpus.md;
# .ci/run registers it), and the image runs under aws-lambda-rie-arm64.
#
# The image needs root (debootstrap), a Docker engine, network (Debian mirror, PyPI) and a
# python3 with pip (the project's venv). Takes about a minute. --host-runtime DIR fetches the
# same runtime pieces for this machine instead (DIR/aws-lambda-rie, DIR/wheels/ with
# awslambdaric for this python3): what tests/functional/image/test_image.py falls back to where no
# Docker engine runs.
#
# What it shares with AWS's image (aws/aws-lambda-base-images, branch python3.13):
#   - the runtime interface client: awslambdaric from PyPI in /var/runtime, started by
#     /var/runtime/bootstrap as `python3 -m awslambdaric $_HANDLER` from /var/task;
#   - the Runtime Interface Emulator at /usr/local/bin/aws-lambda-rie (AWS's binary, from the
#     aws-sam-cli wheel: samcli/local/rapid/aws-lambda-rie-<arch>);
#   - /lambda-entrypoint.sh with the same logic: the handler as its one argument, the RIE in
#     front of the runtime when AWS_LAMBDA_RUNTIME_API is unset (locally), the runtime alone
#     when it is set (on Lambda);
#   - the same ENV (LANG, TZ, PATH, LD_LIBRARY_PATH, LAMBDA_TASK_ROOT=/var/task,
#     LAMBDA_RUNTIME_DIR=/var/runtime), WORKDIR /var/task and ENTRYPOINT;
#   - Python 3.13 with pip, not marked externally managed (pip may install into /var/task).
# What it does NOT share:
#   - the OS: Debian trixie (glibc 2.41), not Amazon Linux 2023 (glibc 2.34); a wheel that
#     needs a newer glibc than 2.34 would work here and fail on Lambda (the lock's wheels are
#     manylinux_2_17/2_28, which both accept);
#   - Python: Debian's /usr/bin/python3 (3.13.5), not AWS's build in /var/lang; no boto3 in
#     /var/runtime (the function's lock brings its own);
#   - trust: the host's local CAs (/usr/local/share/ca-certificates) are added, so that the
#     build reaches PyPI through the same TLS-intercepting proxy as the host;
#   - the image's files and size: AWS's image has its own set of system libraries; only what
#     the project's image uses is exercised;
#   - everything Lambda itself does around the image: the Firecracker sandbox, the lazy
#     chunked image loading, the 10 s init limit, memory and CPU limits, the read-only root
#     and non-root user (the tests reproduce those two with `docker run --read-only --user`),
#     IAM credentials, the Extensions and Telemetry APIs, X-Ray.
set -euo pipefail

SUITE=trixie
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
AWSLAMBDARIC_VERSION=4.2.2
AWS_SAM_CLI_VERSION=1.170.0
PYTHON_VERSION=3.13
case "${SIGLIP_IMAGE_ARCH:-$(uname -m)}" in
    x86_64|amd64) ARCH=x86_64; PLATFORM=manylinux2014_x86_64; DEBARCH=amd64 ;;
    aarch64|arm64) ARCH=arm64; PLATFORM=manylinux2014_aarch64; DEBARCH=arm64 ;;
    *) echo "unsupported machine ${SIGLIP_IMAGE_ARCH:-$(uname -m)}" >&2; exit 2 ;;
esac
NATIVE_ARCH="$(uname -m | sed 's/aarch64/arm64/')"
PIP="${PIP:-python3 -m pip}"

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
ROOTFS="$WORK/rootfs"

# AWS's Runtime Interface Emulator, as the aws-sam-cli wheel ships it.
fetch_rie() {
    $PIP download --quiet --no-deps --no-cache-dir "aws-sam-cli==$AWS_SAM_CLI_VERSION" -d "$WORK"
    python3 - "$WORK"/aws_sam_cli-*.whl "samcli/local/rapid/aws-lambda-rie-$ARCH" "$1" <<'EOF'
import shutil, sys, zipfile
wheel, member, target = sys.argv[1:]
with zipfile.ZipFile(wheel) as archive, archive.open(member) as src, open(target, "wb") as dst:
    shutil.copyfileobj(src, dst)
EOF
    chmod 0755 "$1"
}

if [ "${1:-}" = "--host-runtime" ]; then
    DIR="${2:?--host-runtime DIR}"
    mkdir -p "$DIR/wheels"
    $PIP download --quiet --only-binary=:all: "awslambdaric==$AWSLAMBDARIC_VERSION" -d "$DIR/wheels"
    fetch_rie "$DIR/aws-lambda-rie"
    echo "host runtime: $DIR/aws-lambda-rie, awslambdaric $AWSLAMBDARIC_VERSION in $DIR/wheels" >&2
    exit 0
fi
if [ "$ARCH" = "$NATIVE_ARCH" ]; then
    TAG="${1:-public.ecr.aws/lambda/python:3.13}"
else
    TAG="${1:-public.ecr.aws/lambda/python:3.13-$ARCH}"
fi

echo "stand-in base image: debootstrap $SUITE" >&2
debootstrap --arch="$DEBARCH" --variant=minbase --include=python3,python3-pip "$SUITE" "$ROOTFS" "$MIRROR" \
    > "$WORK/debootstrap.log" 2>&1 || { tail -20 "$WORK/debootstrap.log" >&2; exit 1; }
rm -f "$ROOTFS"/usr/lib/python3*/EXTERNALLY-MANAGED
# The host's own local CAs (a TLS-intercepting proxy's, as on the CI machines), so that the
# image build's `pip install` reaches PyPI from where the host does. AWS's image has none.
if compgen -G "/usr/local/share/ca-certificates/*.crt" > /dev/null; then
    cp /usr/local/share/ca-certificates/*.crt "$ROOTFS/usr/local/share/ca-certificates/"
    chroot "$ROOTFS" update-ca-certificates > /dev/null 2>&1
fi
rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/*

echo "stand-in base image: awslambdaric $AWSLAMBDARIC_VERSION in /var/runtime" >&2
$PIP install --quiet --no-cache-dir --target "$ROOTFS/var/runtime" --only-binary=:all: \
    --python-version "$PYTHON_VERSION" --implementation cp --platform "$PLATFORM" \
    "awslambdaric==$AWSLAMBDARIC_VERSION"

echo "stand-in base image: the RIE from aws-sam-cli $AWS_SAM_CLI_VERSION" >&2
fetch_rie "$ROOTFS/usr/local/bin/aws-lambda-rie"

cat > "$ROOTFS/lambda-entrypoint.sh" <<'EOF'
#!/bin/sh
# As in AWS's Lambda base images: the handler is the one argument; locally (no
# AWS_LAMBDA_RUNTIME_API) the Runtime Interface Emulator runs the runtime behind it.
if [ $# -ne 1 ]; then
  echo "entrypoint requires the handler name to be the first argument" 1>&2
  exit 142
fi
export _HANDLER="$1"

RUNTIME_ENTRYPOINT=/var/runtime/bootstrap
if [ -z "${AWS_LAMBDA_RUNTIME_API}" ]; then
  exec /usr/local/bin/aws-lambda-rie $RUNTIME_ENTRYPOINT
else
  exec $RUNTIME_ENTRYPOINT
fi
EOF
cat > "$ROOTFS/var/runtime/bootstrap" <<EOF
#!/bin/sh
# The Python runtime: AWS's runtime interface client, importing the handler from /var/task.
export AWS_EXECUTION_ENV=AWS_Lambda_python$PYTHON_VERSION
export PYTHONPATH="/var/runtime\${PYTHONPATH:+:\$PYTHONPATH}"
cd "\${LAMBDA_TASK_ROOT:-/var/task}"
exec /usr/bin/python3 -m awslambdaric "\$_HANDLER"
EOF
chmod 0755 "$ROOTFS/lambda-entrypoint.sh" "$ROOTFS/var/runtime/bootstrap"
mkdir -p "$ROOTFS/var/task" "$ROOTFS/opt"

echo "stand-in base image: docker import as $TAG" >&2
tar -C "$ROOTFS" --numeric-owner -c . | docker import --platform "linux/$DEBARCH" \
    --change 'ENV LANG=en_US.UTF-8' \
    --change 'ENV TZ=:/etc/localtime' \
    --change 'ENV PATH=/var/lang/bin:/usr/local/bin:/usr/bin/:/bin:/opt/bin' \
    --change 'ENV LD_LIBRARY_PATH=/var/lang/lib:/lib64:/usr/lib64:/var/runtime:/var/runtime/lib:/var/task:/var/task/lib:/opt/lib' \
    --change 'ENV LAMBDA_TASK_ROOT=/var/task' \
    --change 'ENV LAMBDA_RUNTIME_DIR=/var/runtime' \
    --change 'WORKDIR /var/task' \
    --change 'ENTRYPOINT ["/lambda-entrypoint.sh"]' \
    --message "stand-in for public.ecr.aws/lambda/python:$PYTHON_VERSION (scripts/make_standin_base_image.sh)" \
    - "$TAG" >/dev/null
docker image inspect --format '{{.Id}} {{.Size}}' "$TAG"
