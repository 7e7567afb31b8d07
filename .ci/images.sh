# The base image: AWS's if present, else the local stand-in (debootstrap), then the function
# image once with network, so that the image test's builds (`sam build` and `docker build`,
# Docker's classic builder both) hit the dependency layer. The template pins AWS's base by
# digest; here the stand-in (no registry digest) is the base. The same for linux/arm64 (the
# dependency layer's pip runs under qemu: a few minutes). No --platform: the arm64 base tag
# decides (the legacy builder given --platform looks its intermediate images up for
# linux/arm64 and finds them recorded as linux/amd64). Emulated and long; if a step fails,
# the arm64 image test skips naming what is missing.
if [ -n "$DOCKER_RUNS" ]; then
    if ! docker image inspect public.ecr.aws/lambda/python:3.13 > /dev/null 2>&1; then
        command -v debootstrap > /dev/null || apt_install debootstrap
        $SUDO env "PATH=$PATH" scripts/make_standin_base_image.sh
    fi
    docker build --quiet --network host -f handler/Dockerfile \
        --build-arg BASE_IMAGE=public.ecr.aws/lambda/python:3.13 \
        --build-arg MODEL_DIR=handler/siglip_text/demo -t siglip-text:demo . > /dev/null
    if [ -n "$ARM64_RUNS" ]; then
        if ! { docker image inspect public.ecr.aws/lambda/python:3.13-arm64 > /dev/null 2>&1 \
            || $SUDO env "PATH=$PATH" SIGLIP_IMAGE_ARCH=arm64 scripts/make_standin_base_image.sh; } \
            || ! docker build --quiet --network host -f handler/Dockerfile \
                --build-arg BASE_IMAGE=public.ecr.aws/lambda/python:3.13-arm64 \
                --build-arg MODEL_DIR=handler/siglip_text/demo -t siglip-text:demo-arm64 . > /dev/null
        then
            echo "ARM64 IMAGE NOT BUILT: the stand-in arm64 base or the image build failed above"
        fi
    fi
else
    echo "NO IMAGES: no Docker engine (the image test's host fallback runs instead)"
fi
