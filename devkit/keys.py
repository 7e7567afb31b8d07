"""The API keys the tests present and hold in their secrets: test values, not credentials."""

#: The key in events/*-with-api-key.json.
KEY = "sk-siglip-test-key-0123456789abcdef"
#: The key a rotation moves to.
NEW_KEY = "sk-siglip-rotated-key-fedcba9876543210"
