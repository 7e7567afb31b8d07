# The client integrations of docs/clients.md (tests/functional/clients/test_clients.py): the
# clients extra and the heavy clients of .ci/clients-requirements.txt, in one resolution.
pip install -e '.[test,clients]' -r .ci/clients-requirements.txt
