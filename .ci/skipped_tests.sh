# The tests the README's run skipped (its outcomes in $OUTCOMES/readme.json), and only those,
# now that everything they need is set up; then the check that every test collected here ran
# exactly once over the two runs and that each skip declared its need (devkit/outcomes.py).
# The real Gemma tokenizer for the export tests: CI clones it beside shared/ (a relative path
# is taken from the repository root); never copied into the repository.
export SIGLIP_GEMMA_TOKENIZER_DIR="${SIGLIP_GEMMA_TOKENIZER_DIR:-../shared/fixtures/gemma-tokenizer}"
TEST_OUTCOMES="$OUTCOMES/collected.json" python -m pytest --collect-only -q > /dev/null
python -m devkit.outcomes select "$OUTCOMES/collected.json" "$OUTCOMES/readme.json" \
    > "$OUTCOMES/skipped.args"
echo "$(wc -l < "$OUTCOMES/skipped.args") ids or modules the README's run did not run"
LAST_STATUS=0
if [ -s "$OUTCOMES/skipped.args" ]; then
    TEST_OUTCOMES="$OUTCOMES/rest.json" python -m pytest "@$OUTCOMES/skipped.args" || LAST_STATUS=$?
else
    echo '{"collected": {}, "outcomes": {}}' > "$OUTCOMES/rest.json"
fi
python -m devkit.outcomes check "$OUTCOMES/collected.json" "$OUTCOMES/readme.json" "$OUTCOMES/rest.json" \
    || { echo "EACH TEST ONCE: the check above failed" >&2; exit 1; }
[ "$LAST_STATUS" = 0 ] || { echo "THE SKIPPED TESTS' RUN FAILED (exit $LAST_STATUS)" >&2; exit "$LAST_STATUS"; }
