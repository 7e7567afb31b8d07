"""Every documented command and every event, on the demo and on a real-shaped int8 bundle.

The demo bundle is what every other test runs on: a plain fp32 graph, 32 dimensions, a
small vocabulary. A user's bundle is what ``siglip-text export --precision int8`` writes
for ``google/siglip2-*``: an optimized, quantized graph, the 256k Gemma tokenizer, 768
dimensions, another model id (devkit/real_bundle.py makes one at toy width through
the export command). A documented command that works only on the demo is a defect, so each
test here takes both.

Where the commands come from: README.md and docs/*.md. Those that need a Docker engine or
SAM (``sam build``, ``sam local invoke`` with events/*, the image) run in
tests/functional/test_sam_local.py and test_image.py, on both bundles too; ``fidelity`` runs
here on this CPU only (its emulated CPUs need qemu-user and root: test_cpus.py);
``check-deploy`` reads samconfig.toml and the template, no bundle; ``serve --demo`` and the
client snippets of README.md and docs/clients.md name the demo and its model.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from siglip_text.cli import main
from siglip_text.engine.service import EmbeddingService
from siglip_text.settings import demo_model_dir, load_service, load_settings

from devkit import real_bundle
from devkit.aws_lambda import LambdaContext, built_lambda, expected_status
from devkit.events import event_files
from devkit.openai_shapes import assert_openai_error, assert_openai_response
from devkit.paths import FIXTURES, ROOT
from devkit.processes import python
from devkit.servers import serving

#: The real-shaped bundle is exported once per session (a minute or two): its cases are slow.
BUNDLES = ("demo", pytest.param("real-int8", marks=[pytest.mark.slow, pytest.mark.export]))
DEMO_MODEL = "siglip-text/synthetic-demo-tiny"
QUERIES = [
    "a photo of a cat",
    "",
    "A Photo Of A CAT",
    "一只猫的照片",
    "two people riding bicycles on a city street at night",
    "<eos> is text here",
]
CLASSES = ["cat", "dog", "bird", "car", "robot arm", "red block", "kitchen", "beach"]


@dataclass(frozen=True)
class Bundle:
    """A bundle under test: its directory, its pin, and the checkpoint it came from."""

    name: str
    directory: Path
    pin: Path
    model_id: str
    dimension: int
    checkpoint: Path | None  # the demo's training run left none
    revision: str


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> real_bundle.RealBundle:
    return real_bundle.real_bundle(tmp_path_factory)


@pytest.fixture(scope="module", params=BUNDLES)
def bundle(request: pytest.FixtureRequest) -> Bundle:
    if request.param == "demo":
        demo = demo_model_dir()
        manifest = json.loads((demo / "manifest.json").read_text())
        return Bundle(
            "demo",
            demo,
            demo.with_name("demo.sha256"),
            manifest["repository"],
            int(manifest["embedding_dimension"]),
            None,
            manifest["revision"],
        )
    made: real_bundle.RealBundle = request.getfixturevalue("real")
    manifest = json.loads((made.bundle / "manifest.json").read_text())
    return Bundle(
        "real-int8",
        made.bundle,
        made.bundle.with_name(made.bundle.name + ".sha256"),
        manifest["repository"],
        int(manifest["embedding_dimension"]),
        made.checkpoint,
        manifest["revision"],
    )


@pytest.fixture(scope="module")
def bundle_service(bundle: Bundle) -> EmbeddingService:
    return load_service(load_settings(model_dir=bundle.directory, ort_intra_op_threads=1))


# ------------------------------------------------------------------------- the bundle itself


@pytest.mark.export
@pytest.mark.slow
def test_real_bundle_has_a_user_bundles_shape(real: real_bundle.RealBundle) -> None:
    # GIVEN the bundle `siglip-text export --precision int8` wrote for the random checkpoint
    manifest = json.loads((real.bundle / "manifest.json").read_text())
    ops = real_bundle.graph_ops(real.bundle)
    # THEN it is what a user's bundle is, not what the demo is
    assert manifest["precision"] == "int8"
    assert manifest["graph_optimization"] != "none"
    assert set(real_bundle.QUANTIZED_OPS) <= set(ops), ops
    assert manifest["embedding_dimension"] == real_bundle.DIMENSION != 32
    assert manifest["repository"] == real_bundle.REPOSITORY != DEMO_MODEL
    assert manifest["tokenizer_merges"]["token_ids"] == 256_000
    assert (real.bundle / "text_model.onnx.data").is_file()


# ------------------------------------------------------------------------------ the events


@pytest.mark.slow
def test_every_event_gets_its_documented_status_with_the_bundle_in_place(
    bundle: Bundle,
) -> None:
    # GIVEN the Lambda function built on the bundle, as its init builds it
    answers: dict[str, tuple[int, dict[str, Any]]] = {}
    with built_lambda(bundle.directory) as function:
        for path in event_files():
            result = function.handler(json.loads(path.read_text()), LambdaContext())
            body = result["body"]
            if result.get("isBase64Encoded"):
                body = base64.b64decode(body).decode()
            answers[path.name] = (result["statusCode"], json.loads(body))
    # and a custom domain's events with its base path (docs/deploy.md, "Test locally")
    with built_lambda(bundle.directory, SIGLIP_API_BASE_PATH="siglip") as function:
        for path in sorted((ROOT / "events" / "custom-domain").glob("*.json")):
            result = function.handler(json.loads(path.read_text()), LambdaContext())
            answers[f"custom-domain/{path.name}"] = (
                result["statusCode"],
                json.loads(result["body"]),
            )
    # THEN each event answers as documented: no 404 model_not_found for another bundle
    assert len(answers) == len(event_files()) + 2 >= 24
    for name, (status, body) in answers.items():
        assert status == expected_status(name), (name, body)
        if status != 200:
            assert_openai_error(body)
            assert body["error"]["code"] != "model_not_found", name
        elif "embeddings" in name:
            assert_openai_response(body)
            assert body["model"] == bundle.model_id, name
            first = body["data"][0]["embedding"]
            if isinstance(first, list):
                assert len(first) == bundle.dimension, name


def test_no_event_names_a_model() -> None:
    # The model field is optional (OpenAI's clients send it; the contract does not need it):
    # an event that names the demo's model asks every other bundle for a model it lacks.
    for path in event_files():
        event = json.loads(path.read_text())
        body = event.get("body") or ""
        if event.get("isBase64Encoded"):
            body = base64.b64decode(body).decode()
        assert '"model"' not in body, path.name
    for path in sorted((ROOT / "events" / "custom-domain").glob("*.json")):
        assert '\\"model\\"' not in path.read_text(), path.name


# ------------------------------------------------------------------ commands on a bundle dir


@pytest.mark.slow
def test_embed_writes_the_bundles_vectors(
    bundle: Bundle, bundle_service: EmbeddingService, tmp_path: Path
) -> None:
    # siglip-text embed texts.txt --out vectors.npy (docs/export.md "The other tools")
    source = tmp_path / "texts.txt"
    source.write_text("\n".join(QUERIES) + "\n")
    out = tmp_path / "vectors.npy"
    assert main(["embed", str(source), "--out", str(out), *local(bundle), "--quiet"]) == 0
    vectors = np.load(out)
    assert vectors.shape == (len(QUERIES), bundle.dimension)
    np.testing.assert_allclose(vectors, bundle_service.embed_texts(QUERIES).vectors, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


@pytest.mark.slow
def test_zero_shot_finds_each_class_of_images_made_from_its_prompt(
    bundle: Bundle,
    bundle_service: EmbeddingService,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # siglip-text zero-shot --images images.npy --labels labels.txt --classes classes.txt
    files = zero_shot_files(bundle_service, tmp_path)
    report = tmp_path / "report.json"
    argv = ["zero-shot", *files, "--json", str(report), *local(bundle)]
    assert main(argv) == 0, capsys.readouterr().err
    result = json.loads(report.read_text())
    assert result["top1"] == 1.0 and result["images"] == len(CLASSES)


@pytest.mark.slow
def test_verify_passes_against_the_checkpoints_reference(
    bundle: Bundle, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # siglip-text reference CHECKPOINT --revision SHA queries.txt --out reference.jsonl
    # siglip-text verify --model-dir DIR --reference reference.jsonl (docs/export.md, 2.)
    #   --images image_embeddings.npy (a sample of the index: here random vectors)
    reference = reference_file(bundle, tmp_path)
    images = tmp_path / "image_embeddings.npy"
    rng = np.random.default_rng(48)
    np.save(images, rng.standard_normal((500, bundle.dimension)).astype(np.float32))
    report = tmp_path / "verify.json"
    argv = ["verify", "--reference", str(reference), "--images", str(images)]
    status = main([*argv, "--json", str(report), *local(bundle)])
    assert status == 0, capsys.readouterr().out[-3000:]
    checks = json.loads(report.read_text())["checks"]
    assert {c["name"] for c in checks} == {"files", "tokenizer", "vectors", "retrieval"}
    assert all(c["passed"] for c in checks), checks


@pytest.mark.export
@pytest.mark.slow
def test_fingerprint_of_the_checkpoint_is_the_bundles(
    real: real_bundle.RealBundle, capsys: pytest.CaptureFixture[str]
) -> None:
    # siglip-text fingerprint CHECKPOINT --repository R --revision V (the demo has no
    # checkpoint: its training script wrote the bundle directly)
    manifest = json.loads((real.bundle / "manifest.json").read_text())
    capsys.readouterr()
    argv = ["fingerprint", str(real.checkpoint), "--repository", real_bundle.REPOSITORY]
    assert main([*argv, "--revision", real_bundle.REVISION]) == 0
    assert manifest["fingerprint"] in capsys.readouterr().out


def test_check_bundle_files_accepts_the_bundle_and_its_pin(bundle: Bundle) -> None:
    # python3 scripts/check_bundle_files.py layers/model layers/model.sha256 (docs/deploy.md)
    script = "scripts/check_bundle_files.py"
    done = python(script, str(bundle.directory), str(bundle.pin), timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


# ------------------------------------------------------------- commands on a served bundle


@pytest.mark.slow
def test_served_bundle_answers_every_documented_client_command(
    bundle: Bundle,
    bundle_service: EmbeddingService,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with served(bundle.directory) as base:
        # curl .../health, /v1/models, /v1/embeddings, /tokenize (README, docs/api.md)
        health = httpx.get(f"{base}/health", timeout=10).json()
        assert health["model"] == bundle.model_id
        models = httpx.get(f"{base}/v1/models", timeout=10).json()
        assert [m["id"] for m in models["data"]] == [bundle.model_id]
        answer = httpx.post(
            f"{base}/v1/embeddings",
            json={"model": bundle.model_id, "input": ["a red block", "a robot arm"]},
            timeout=30,
        )
        assert answer.status_code == 200, answer.text
        assert len(answer.json()["data"][0]["embedding"]) == bundle.dimension
        tokens = httpx.post(f"{base}/tokenize", json={"inputs": "A Kitten <eos>"}, timeout=10)
        assert tokens.status_code == 200, tokens.text
        (pieces,) = tokens.json()
        assert pieces[-1]["id"] == 1 and "<eos>" not in [p["text"] for p in pieces[:-1]]
        # the README's OpenAI snippet, with the served model's id
        openai = pytest.importorskip("openai", reason="the openai client (test extra)")
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="not-used")
        got = client.embeddings.create(model=bundle.model_id, input=QUERIES[:2])
        np.testing.assert_allclose(
            np.array([d.embedding for d in got.data]),
            bundle_service.embed_texts(QUERIES[:2]).vectors,
            atol=1e-6,
        )

        # siglip-text load-test --url BASE (docs/deploy.md, docs/sizes.md)
        stats = tmp_path / "load.json"
        argv = ["load-test", "--url", base, "--requests", "12", "--concurrency", "2"]
        assert main([*argv, "--warmup", "2", "--json", str(stats)]) == 0
        figures = json.loads(stats.read_text())
        assert json.dumps(figures).count('"200"') >= 1 and "error" not in figures.get(
            "statuses", {}
        ), figures

        # siglip-text embed --url, verify --url, zero-shot --url (docs/export.md)
        url = ["--url", f"{base}/v1"]
        source = tmp_path / "texts.txt"
        source.write_text("\n".join(QUERIES) + "\n")
        out = tmp_path / "remote.npy"
        assert main(["embed", str(source), "--out", str(out), *url, "--quiet"]) == 0
        np.testing.assert_allclose(
            np.load(out), bundle_service.embed_texts(QUERIES).vectors, atol=1e-6
        )
        reference = reference_file(bundle, tmp_path)
        assert main(["verify", "--reference", str(reference), *url, "--quiet"]) == 0, (
            capsys.readouterr().out[-3000:]
        )
        report = tmp_path / "zero-shot.json"
        files = zero_shot_files(bundle_service, tmp_path)
        assert main(["zero-shot", *files, "--json", str(report), *url]) == 0
        assert json.loads(report.read_text())["top1"] == 1.0

        # siglip-text fingerprint CHECKPOINT ... --url (docs/contract.md): the endpoint's
        # /health against the checkpoint
        if bundle.checkpoint is not None:
            argv = ["fingerprint", str(bundle.checkpoint), "--repository", bundle.model_id]
            assert main([*argv, "--revision", bundle.revision, "--url", base]) == 0


# -------------------------------------------------------------------------- the benchmarks


@pytest.mark.slow
def test_benchmark_run_prints_its_tables_on_the_bundle(bundle: Bundle, tmp_path: Path) -> None:
    # python -m benchmarks.run --bundle int8=DIR --runs 5, without --checkpoint (issue 48):
    # the floor of an optimized int8 graph is counted from its quantized operators' weights
    precision = json.loads((bundle.directory / "manifest.json").read_text()).get("precision")
    name = precision or "fp32"
    figures_path = tmp_path / "figures.json"
    done = run_module(
        "benchmarks.run",
        "--bundle",
        f"{name}={bundle.directory}",
        "--runs",
        "5",
        "--batches",
        "1,2",
        "--threads",
        "1",
        "--json",
        str(figures_path),
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for heading in ("## Latency", "## Init", "## Matmul floor", "## Fidelity"):
        assert heading in done.stdout, heading
    figures = json.loads(figures_path.read_text())
    floor = figures["floor"]
    assert "error" not in floor, floor
    assert floor[f"{name}_floor_ms"] > 0 and floor["model_gflop_per_query"] > 0
    assert figures[name]["paired_floor"]["ratio_median"] > 0


# --------------------------------------------------------------------------------- helpers


def local(bundle: Bundle) -> list[str]:
    """The in-process backend of embed, verify and zero-shot on the bundle, one thread."""
    return ["--model-dir", str(bundle.directory), "--threads", "1"]


def zero_shot_files(bundle_service: EmbeddingService, tmp_path: Path) -> list[str]:
    """--images/--labels/--classes whose answer is known: image i is class i's own prompt
    vector (the default template), so every image's top-1 is its class."""
    from siglip_text.tools.zero_shot import DEFAULT_TEMPLATE

    prompts = [DEFAULT_TEMPLATE.format(name) for name in CLASSES]
    images = tmp_path / "images.npy"
    np.save(images, bundle_service.embed_texts(prompts).vectors)
    labels = tmp_path / "labels.txt"
    labels.write_text("".join(f"{i}\n" for i in range(len(CLASSES))))
    # the class file as the seed downloads it (imagenet1000_clsidx_to_labels.txt's dict)
    classes = tmp_path / "classes.txt"
    classes.write_text(repr(dict(enumerate(CLASSES))))
    return ["--images", str(images), "--labels", str(labels), "--classes", str(classes)]


def reference_file(bundle: Bundle, tmp_path: Path) -> Path:
    """The reference JSONL: ``siglip-text reference`` on the checkpoint; for the demo, which
    has none, the one its training script wrote (tests/fixtures/demo_reference.json)."""
    out = tmp_path / "reference.jsonl"
    if out.is_file():
        return out
    if bundle.checkpoint is None:
        cases = json.loads((FIXTURES / "demo_reference.json").read_text())["cases"]
        out.write_text("".join(json.dumps(case) + "\n" for case in cases))
        return out
    queries = tmp_path / "queries.txt"
    queries.write_text("\n".join(QUERIES) + "\n")
    argv = ["reference", str(bundle.checkpoint), str(queries), "--out", str(out)]
    assert main([*argv, "--revision", bundle.revision]) == 0
    return out


def run_module(module: str, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """``python -m MODULE ARGS`` from the repository root, as the docs run it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIGLIP_")}
    return python("-m", module, *args, env=env, timeout=timeout, check=False)


@contextmanager
def served(model_dir: Path) -> Iterator[str]:
    """``siglip-text serve --model-dir DIR`` on a free loopback port, healthy; its base URL."""
    args = ["--model-dir", str(model_dir), "--log-level", "warning"]
    with serving(args, healthy_within=120) as server:
        yield server.base


#: The benchmarks docs/performance.md, docs/api.md, docs/cpus.md and docs/managed-instances.md
#: run on a bundle, with few runs (what they print, not their figures, is checked here).
BENCHMARKS = {
    "session_options": ("--bundle", "{dir}", "--runs", "10"),
    "sizes": ("--bundle", "{name}={dir}", "--runs", "3"),
    "int8_forms": ("--bundle", "{name}={dir}", "--runs", "3"),
    "request_memory": ("--model-dir", "{dir}", "--body", "ascii"),
    "managed_instances": ("--bundle", "{name}={dir}", "--measure", "--seconds", "1"),
}


@pytest.mark.slow
@pytest.mark.parametrize("module", sorted(BENCHMARKS))
def test_documented_benchmark_runs_on_the_bundle(bundle: Bundle, module: str) -> None:
    # python -m benchmarks.MODULE --bundle DIR ... (each as its page shows it)
    args = [a.format(dir=bundle.directory, name=bundle.name) for a in BENCHMARKS[module]]
    done = run_module(f"benchmarks.{module}", *args, timeout=600)
    if module == "managed_instances" and bundle.checkpoint is None:
        # The demo was not exported: its manifest has no memory need, and the tool says so
        # (its page runs it on exported bundles, or with --need).
        assert done.returncode == 2 and "records no memory need" in done.stderr, done.stderr
        return
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert done.stdout.strip(), done.stderr[-3000:]


@pytest.mark.slow
def test_fidelity_on_this_cpu_compares_the_bundle_with_its_fp32_export(
    bundle: Bundle, request: pytest.FixtureRequest
) -> None:
    # siglip-text fidelity INT8_BUNDLE --fp32 FP32_BUNDLE --cpu native (docs/cpus.md); the
    # emulated CPUs need qemu-user and root (tests/functional/test_cpus.py)
    if bundle.checkpoint is None:
        fp32 = bundle.directory  # the demo is fp32 itself
    else:
        fp32 = real_bundle.fp32_sibling(request.getfixturevalue("real"))
    argv = ["fidelity", str(bundle.directory), "--fp32", str(fp32), "--cpu", "native"]
    done = subprocess.run(
        [*real_bundle.siglip_text_command(), *argv, "--texts", "8", "--corpus", "64"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    native = json.loads(done.stdout)["cpus"]["native"]
    assert native["cosine"]["count"] == 8
    assert native["cosine"]["cosine_min"] > 0.99, native
