"""http/app.py: the routes, the one error shape of every refusal, and the invocation's
clock, through the app `create_app` builds on the real demo model."""

from __future__ import annotations

from types import SimpleNamespace

from fastapi.testclient import TestClient
from siglip_text.engine.service import EmbeddingService
from siglip_text.http.app import OPENAPI_PATH, ROUTES, invocation_deadline, route_table
from siglip_text.settings import Settings


def test_the_route_table_lists_every_route_and_a_head_for_each_get() -> None:
    table = route_table()
    for route in ROUTES:
        assert (route.method, route.path) in table
        assert (("HEAD", route.path) in table) == (route.method == "GET")
    assert ("GET", OPENAPI_PATH) in table and ("HEAD", OPENAPI_PATH) in table
    # only the two routes with a body have their body read
    assert {r.path for r in ROUTES if r.takes_body} == {"/v1/embeddings", "/tokenize"}


def test_models_lists_the_one_served_model(client: TestClient, service: EmbeddingService) -> None:
    answer = client.get("/v1/models").json()
    assert answer["object"] == "list"
    assert [model["id"] for model in answer["data"]] == [service.model_id]


def test_health_names_the_model_and_says_it_is_up(
    client: TestClient, service: EmbeddingService
) -> None:
    answer = client.get("/health")
    assert answer.status_code == 200
    assert service.model_id in answer.text


def test_an_unknown_route_is_a_404_in_openai_shape_listing_the_routes(client: TestClient) -> None:
    answer = client.get("/v1/embedding")
    error = answer.json()["error"]
    assert answer.status_code == 404
    assert set(error) == {"message", "type", "param", "code"}
    assert "/v1/embeddings" in error["message"]


def test_a_known_route_with_another_method_is_a_405_naming_the_allowed_one(
    client: TestClient,
) -> None:
    answer = client.get("/v1/embeddings")
    assert answer.status_code == 405
    assert "POST" in answer.headers["allow"]
    assert answer.json()["error"]["type"] == "invalid_request_error"


def test_the_invocation_deadline_comes_from_lambdas_context_only(settings: Settings) -> None:
    assert invocation_deadline({}, settings) is None
    context = SimpleNamespace(get_remaining_time_in_millis=lambda: 10_000)
    deadline = invocation_deadline({"aws.context": context}, settings)
    assert deadline is not None
