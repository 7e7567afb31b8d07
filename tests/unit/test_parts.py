"""The running parts one assembly hands a platform (parts.py): typed, each field the object
that runs, and the app's state holding one of them, never a second copy."""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path
from types import UnionType

import pytest
from fastapi import FastAPI
from siglip_text.assembly import assemble
from siglip_text.engine.loading import InitPlan
from siglip_text.engine.service import EmbeddingService
from siglip_text.http.auth import ApiKeyAuthenticator, KeyFileAuthenticator
from siglip_text.http.front import Front
from siglip_text.parts import Parts
from siglip_text.settings import Settings, load_settings

#: The names parts.py imports for type checking only, to resolve its annotations.
TYPE_NAMES = {
    "FastAPI": FastAPI,
    "InitPlan": InitPlan,
    "EmbeddingService": EmbeddingService,
    "ApiKeyAuthenticator": ApiKeyAuthenticator,
    "KeyFileAuthenticator": KeyFileAuthenticator,
    "Front": Front,
    "Settings": Settings,
}


@pytest.fixture(scope="module")
def parts(demo_dir: Path) -> Parts:
    # serve's parts on loopback (its default host): no auth mode needed
    return assemble(load_settings(model_dir=demo_dir, ort_intra_op_threads=1))


def field_types() -> dict[str, typing.Any]:
    return typing.get_type_hints(Parts, localns=TYPE_NAMES)


def test_no_field_of_parts_is_any_and_every_annotation_resolves() -> None:
    # the annotations are strings (postponed evaluation); each names a real class
    annotations = {f.name: f.type for f in dataclasses.fields(Parts)}
    assert set(annotations) == {"settings", "plan", "service", "authenticator", "front", "app"}
    for name, annotation in annotations.items():
        assert "Any" not in str(annotation), f"Parts.{name} is annotated {annotation!r}"
    hints = field_types()
    assert typing.Any not in hints.values()
    for name, hint in hints.items():
        members = typing.get_args(hint) if isinstance(hint, UnionType) else (hint,)
        assert all(isinstance(member, type) for member in members), (name, hint)


def test_each_field_holds_the_running_object_its_annotation_names(parts: Parts) -> None:
    for name, hint in field_types().items():
        value = getattr(parts, name)
        members = typing.get_args(hint) if isinstance(hint, UnionType) else (hint,)
        assert isinstance(value, members), f"Parts.{name} is a {type(value).__name__}"
    # the objects are those that run, not copies: the plan's manifest is the service's; no
    # key check where no auth mode is set
    assert parts.plan.manifest is parts.service.manifest
    assert parts.authenticator is None


def test_the_apps_state_holds_one_object_and_its_service_is_the_parts_service(
    parts: Parts,
) -> None:
    assert set(vars(parts.app.state)["_state"]) == {"served"}
    assert parts.app.state.served.service is parts.service
    assert parts.app.state.served.settings is parts.settings


def test_parts_are_frozen(parts: Parts) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        parts.service = parts.service  # type: ignore[misc]  # the point: it is refused
