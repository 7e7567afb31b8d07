"""tools/urls.py: one reading of every tool's --url, with or without /v1."""

from __future__ import annotations

import pytest
from siglip_text.tools.exit_status import ToolError
from siglip_text.tools.urls import openai_base_url, service_root


@pytest.mark.parametrize(
    "given",
    [
        "http://127.0.0.1:8000",
        "http://127.0.0.1:8000/",
        "http://127.0.0.1:8000/v1",
        "http://127.0.0.1:8000/v1/",
        "http://127.0.0.1:8000/v1/embeddings",
        " http://127.0.0.1:8000/v1 ",
    ],
)
def test_a_base_url_with_or_without_v1_names_one_endpoint(given: str) -> None:
    assert service_root(given) == "http://127.0.0.1:8000"
    assert openai_base_url(given) == "http://127.0.0.1:8000/v1"


@pytest.mark.parametrize(
    ("given", "root"),
    [
        ("https://abc.execute-api.us-east-1.amazonaws.com/Prod", "/Prod"),
        ("https://abc.execute-api.us-east-1.amazonaws.com/Prod/v1", "/Prod"),
        ("https://abc.lambda-url.us-east-1.on.aws/", ""),
        ("https://example.com/v1x", "/v1x"),  # a path that only starts like /v1 is kept
    ],
)
def test_a_stage_path_is_kept_as_the_root(given: str, root: str) -> None:
    host = given.split("/")[2]
    assert service_root(given) == f"https://{host}{root}"


@pytest.mark.parametrize("given", ["127.0.0.1:8000", "ftp://host/v1", "http:///v1", "http://h:x/"])
def test_a_url_that_is_not_http_is_refused_with_the_expected_form(given: str) -> None:
    with pytest.raises(ToolError, match=r"http\(s\)://HOST|port is not a number"):
        service_root(given)
