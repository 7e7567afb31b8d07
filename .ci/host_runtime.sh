# For the image test's host fallback (no Docker engine; tests have no network, so everything
# they need is fetched and built here): the image's lock as wheels, AWS's runtime interface
# client and emulator for this machine.
pip download --quiet --no-deps --only-binary=:all: -r layers/python/requirements.txt -d .wheelhouse
scripts/make_standin_base_image.sh --host-runtime .lambda-runtime
