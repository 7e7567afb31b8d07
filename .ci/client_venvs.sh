# The Python clients of docs/clients.md that cannot join the clients step's resolution (their
# pydantic caps exclude the one the test extra's SAM translator pins): each in a venv of its
# own, .ci/venvs/<name>, with the client and what its snippet needs, never the project. Their
# tests run the documented snippet in that venv's python in a subprocess
# (devkit/client_venvs.py lists them); without a venv they skip, naming it.
while read -r venv packages; do
    venv_started=$SECONDS
    python3 -m venv --clear ".ci/venvs/$venv"
    # shellcheck disable=SC2086 # the package names, one word each
    ".ci/venvs/$venv/bin/pip" install -q $packages
    echo "the $venv venv: $packages ($((SECONDS - venv_started)) s)"
done < <(python -m devkit.client_venvs)
