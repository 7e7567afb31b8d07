# The static checks (the same as .pre-commit-config.yaml): lint, the format of the Python
# files and of the docs' Python blocks, strict typing (mypy --strict on the package,
# benchmarks/, scripts/ and devkit/: pyproject.toml's [tool.mypy] files), the import contracts
# (runtime never imports the tools, ...); then the SAM template's lint (the tests lint it
# again with the SAM transform applied); the deploy pipeline example and the patching bot's
# configuration, against the schemas check-jsonschema ships (offline): GitHub's workflow
# syntax and Renovate's options.
ruff check .
ruff format --check .
mypy
lint-imports
cfn-lint template.yaml template-managed-instances.yaml
check-jsonschema --builtin-schema vendor.github-workflows .github/workflows/*.yml
check-jsonschema --builtin-schema vendor.renovate .github/renovate.json
