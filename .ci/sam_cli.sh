# The AWS SAM CLI, in an environment of its own (it pins a click older than import-linter
# needs): tests/functional/image/test_image.py runs `sam build` itself,
# tests/functional/image/test_sam_local.py its local commands, tests/template/test_guided_deploy.py
# `sam deploy --guided`, and tests/template/test_samconfig_precedence.py asks the CLI's own
# code what it reads.
python3 -m venv .sam-cli && .sam-cli/bin/pip install aws-sam-cli
