# The Node clients of docs/clients.md where npm exists (without it their tests skip, saying so).
if command -v npm > /dev/null; then
    npm install --prefix .ci/node --no-save --no-audit --no-fund --no-package-lock \
        openai ai @ai-sdk/openai @ai-sdk/openai-compatible @langchain/openai
else
    echo "NO NPM: the Node clients' tests skip, naming it"
fi
