#!/usr/bin/env python3
"""Make the tiny demo bundle and its reference outputs: the one way to rebuild them.

    pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
    pip install -e '.[export]'
    python scripts/make_demo_bundle.py

Deterministic (fixed seeds, one torch thread, a fixed SOURCE_DATE_EPOCH: two runs on one
machine with the same library versions give byte-identical files), CPU only, about 18 s of
CPU time. It:

1. trains a small Gemma-style BPE tokenizer (byte fallback, <pad>=0 <eos>=1 <bos>=2 <unk>=3)
   and writes it as a checkpoint ships it (``$A <eos>``, no lowercasing);
2. trains a tiny ``Siglip2TextModel`` (the real architecture, hidden 32, 2 layers) for 150
   steps on synthetic captions: two phrasings of the same scene are pulled together,
   other scenes pushed apart (a symmetric InfoNCE loss). Its vectors therefore carry meaning
   inside its toy world (objects, colours, places and their synonyms), and nothing outside
   it: it is a synthetic demo, not SigLIP weights;
3. saves both with ``save_pretrained`` and exports that checkpoint with ``siglip-text
   export`` (the production command, with ``--single-file --no-optimize --plain-graph``:
   one plain graph, which tests quantize, optimize and corrupt) into handler/siglip_text/demo/;
4. writes tests/fixtures/demo_reference.json: for each edge-case text, the ids from Hugging
   Face's PreTrainedTokenizerFast (padding="max_length", max_length=64, truncation) and the
   L2-normalized pooled output of the PyTorch model fed those ids (no attention mask);
5. measures, through the exported bundle (what ``serve`` loads), the mean cosine of held-out
   paraphrase pairs and of unrelated pairs, and fails unless they are > 0.8 and < 0.3.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from siglip_text.tools.texts import MAX_LENGTH

ROOT = Path(__file__).resolve().parents[1]

DEMO_DIR = ROOT / "handler" / "siglip_text" / "demo"
FIXTURE = ROOT / "tests" / "fixtures" / "demo_reference.json"
VOCAB_SIZE = 1024
REPOSITORY = "siglip-text/synthetic-demo-tiny"
SEED = 20261130
#: exported_at of the manifest (reproducible builds' SOURCE_DATE_EPOCH): 2026-12-01T00:00:00Z.
SOURCE_DATE_EPOCH = "1796083200"
TRAIN_STEPS = 150
BATCH_SCENES = 128
PARAPHRASE_MIN = 0.8
UNRELATED_MAX = 0.3

SPECIAL = ["<pad>", "<eos>", "<bos>", "<unk>"]

# The toy world: a scene is (object, colour or None, place or None); each has synonyms.
OBJECTS = {
    "dog": ["dog", "puppy", "hound"],
    "cat": ["cat", "kitten"],
    "car": ["car", "automobile"],
    "bicycle": ["bicycle", "bike"],
    "boat": ["boat", "sailboat"],
    "plane": ["plane", "airplane"],
    "robot arm": ["robot arm", "robotic arm"],
    "block": ["block", "cube"],
    "horse": ["horse", "pony"],
    "bird": ["bird", "sparrow"],
    "child": ["child", "kid"],
    "train": ["train", "locomotive"],
    "flower": ["flower", "blossom"],
    "chair": ["chair", "seat"],
    "cake": ["cake", "pastry"],
    "phone": ["phone", "smartphone"],
}
COLOURS = {
    "red": ["red", "crimson"],
    "blue": ["blue", "azure"],
    "green": ["green", "emerald"],
    "yellow": ["yellow", "golden"],
    "black": ["black", "jet-black"],
    "white": ["white", "snow-white"],
    "orange": ["orange", "tangerine"],
    "purple": ["purple", "violet"],
}
PLACES = {
    "beach": ["beach", "shore", "seaside"],
    "kitchen": ["kitchen", "cookhouse"],
    "street": ["street", "road"],
    "mountain": ["mountain", "hillside"],
    "park": ["park", "meadow"],
    "forest": ["forest", "woods"],
    "city": ["city", "downtown"],
    "lake": ["lake", "pond"],
    "table": ["table", "desk"],
    "snow": ["snow", "snowfield"],
}
TEMPLATES = [
    "a photo of a {c} {o} on the {p}",
    "a {c} {o} at the {p}",
    "picture of a {c} {o} near the {p}",
    "the {p}, with a {c} {o}",
    "there is a {c} {o} by the {p}",
    "close-up of a {c} {o} in the {p}",
    "{c} {o}, {p}",
    "an image showing a {c} {o} beside the {p}",
    "A {C} {O} ON THE {P}",
]
# Words of other captions, kept in the tokenizer's corpus (and the edge cases' scripts).
EXTRA_WORDS = (  # noqa: SIM905 (a list literal would be 80 lines)
    "a the photo picture image of on in with and small large two three old new wooden metal "
    "night day sunset person man woman playing running sitting standing holding house tree "
    "window door sofa bed book cup bottle computer screen keyboard camera video frame scene "
    "close view café crème brûlée naïve façade über straße niño año garçon élève 猫 狗 的 照片 "
    "一只 城市 夜晚 写真 ねこ いぬ 사진 고양이 صورة قطة كلب תמונה של חתול фото кошка собака"
).split()

EDGE_CASES = [
    "a photo of a cat",
    "",
    " ",
    "   \t\n  ",
    "A Photo Of A CAT",
    "A PHOTO OF A CAT",
    "Café Crème BRÛLÉE, naïve façade",
    "ÉCOLE Über STRASSE",
    "İstanbul ΣΊΣΥΦΟΣ",
    "一只猫的照片",
    "東京の夜景の写真",
    "고양이 사진",
    "صورة قطة على الطاولة",
    "תמונה של חתול",
    "mixed RTL صورة and LTR text",
    "🐱🚀 emoji 👩‍👩‍👧 ZWJ family 🇯🇵",
    "control\x00chars\x07and\x1bescape\x7f",
    "tab\tseparated\tand\nnew\r\nlines",
    "e\u0301 combining acute vs é precomposed",
    "punctuation!!! ??? ... ;;; --- (brackets) [more] {braces} \"quotes\" 'single'",
    "   leading and trailing spaces   ",
    "multiple     inner      spaces",
    "numbers 0123456789 3.14159 1,000,000",
    "this is a photo of a dog.",
    " ".join(["a red block and a robot arm on the kitchen table"] * 12),
    "supercalifragilisticexpialidocious" * 8,
    "x" * 500,
    "🐱" * 80,
]

Scene = tuple[str, str | None, str | None]


def all_scenes() -> list[Scene]:
    colours: list[str | None] = [None, *COLOURS]
    places: list[str | None] = [None, *PLACES]
    return [(o, c, p) for o in OBJECTS for c in colours for p in places]


def split_scenes() -> tuple[list[Scene], list[Scene]]:
    """Scenes to train on, and held-out scenes (never seen in training) to measure on."""
    scenes = all_scenes()
    random.Random(SEED + 1).shuffle(scenes)
    held_out = len(scenes) // 10
    return scenes[held_out:], scenes[:held_out]


def caption(scene: Scene, rng: random.Random) -> str:
    """One phrasing of a scene: a random template, a random synonym for each part."""
    obj, colour, place = scene
    template = rng.choice(TEMPLATES)
    o = rng.choice(OBJECTS[obj])
    c = rng.choice(COLOURS[colour]) if colour else ""
    p = rng.choice(PLACES[place]) if place else ""
    if not place:  # drop the place clause: "... on the {p}" -> "..."
        for clause in (
            " on the {p}",
            " at the {p}",
            " near the {p}",
            " by the {p}",
            " in the {p}",
            " beside the {p}",
            " ON THE {P}",
            ", {p}",
        ):
            template = template.replace(clause, "")
        template = template.replace("the {p}, with ", "")
    text = template.format(o=o, c=c, p=p, O=o.upper(), C=c.upper(), P=p.upper())
    return " ".join(text.split()).replace(" ,", ",")


def paraphrase_pairs(scenes: list[Scene], rng: random.Random) -> list[tuple[str, str]]:
    pairs = []
    for scene in scenes:
        first = caption(scene, rng)
        second = caption(scene, rng)
        while second == first:
            second = caption(scene, rng)
        pairs.append((first, second))
    return pairs


def unrelated_pairs(scenes: list[Scene], rng: random.Random) -> list[tuple[str, str]]:
    """Pairs of scenes sharing nothing: another object, colour and place (each given)."""
    full = [s for s in scenes if s[1] and s[2]]
    pairs = []
    for scene in full:
        others = [s for s in full if all(a != b for a, b in zip(s, scene, strict=True))]
        pairs.append((caption(scene, rng), caption(rng.choice(others), rng)))
    return pairs


def train_tokenizer() -> Any:
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    rng = random.Random(SEED)
    vocabulary = EXTRA_WORDS + [
        w for group in (OBJECTS, COLOURS, PLACES) for s in group.values() for w in s
    ]
    train, _ = split_scenes()
    corpus = [
        " ".join(rng.choice(vocabulary) for _ in range(rng.randint(3, 12))) for _ in range(3000)
    ]
    corpus += [caption(rng.choice(train), rng) for _ in range(3000)]
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    # Gemma-style: spaces become "▁", which starts each word piece; no dummy prefix.
    tokenizer.normalizer = normalizers.Replace(" ", "▁")
    tokenizer.pre_tokenizer = pre_tokenizers.Split("▁", behavior="merged_with_next")
    tokenizer.decoder = decoders.Sequence(
        [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
    )
    byte_tokens = [f"<0x{b:02X}>" for b in range(256)]
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL + byte_tokens,
        show_progress=False,
        initial_alphabet=[],
        min_frequency=2,
    )
    tokenizer.train_from_iterator((line.lower() for line in corpus), trainer=trainer)
    for i, tok in enumerate(SPECIAL):
        assert tokenizer.token_to_id(tok) == i, (tok, tokenizer.token_to_id(tok))
    return tokenizer


def checkpoint_tokenizer(trained: Any) -> Any:
    """The tokenizer as a SigLIP 2 checkpoint ships it: EOS appended, no lowercasing."""
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast

    eos = trained.token_to_id("<eos>")
    trained.post_processor = processors.TemplateProcessing(
        single="$A <eos>", pair="$A $B <eos>", special_tokens=[("<eos>", eos)]
    )
    return PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=trained,
        pad_token="<pad>",
        eos_token="<eos>",
        bos_token="<bos>",
        unk_token="<unk>",
    )


def build_model(vocab_size: int) -> Any:
    import torch
    from transformers import Siglip2TextConfig, Siglip2TextModel

    torch.manual_seed(SEED)
    config = Siglip2TextConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        max_position_embeddings=MAX_LENGTH,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=2,
    )
    return Siglip2TextModel(config)


def train(model: Any, tokenizer: Any) -> list[float]:
    """Symmetric InfoNCE on two phrasings of each scene in a batch; returns the losses."""
    import torch

    def ids_of(texts: list[str]) -> Any:
        batch = tokenizer(
            [t.lower() for t in texts], padding="max_length", max_length=MAX_LENGTH, truncation=True
        )
        return torch.tensor(batch["input_ids"], dtype=torch.long)

    train_scenes, _ = split_scenes()
    rng = random.Random(SEED + 2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=3e-3, total_steps=TRAIN_STEPS, pct_start=0.1
    )
    temperature = 0.05
    losses = []
    model.train()
    for _ in range(TRAIN_STEPS):
        scenes = rng.sample(train_scenes, BATCH_SCENES)
        pairs = paraphrase_pairs(scenes, rng)
        left = model(input_ids=ids_of([a for a, _ in pairs])).pooler_output
        right = model(input_ids=ids_of([b for _, b in pairs])).pooler_output
        left = torch.nn.functional.normalize(left, dim=-1)
        right = torch.nn.functional.normalize(right, dim=-1)
        logits = left @ right.T / temperature
        target = torch.arange(len(pairs))
        loss = (
            torch.nn.functional.cross_entropy(logits, target)
            + torch.nn.functional.cross_entropy(logits.T, target)
        ) / 2
        optimizer.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
    model.eval()
    return losses


def measure_meaning(service: Any) -> dict[str, float]:
    """Mean cosine of held-out paraphrase pairs and unrelated pairs, through the bundle."""
    import numpy as np

    _, held_out = split_scenes()
    rng = random.Random(SEED + 3)
    result: dict[str, float] = {}
    for name, pairs in (
        ("paraphrase", paraphrase_pairs(held_out, rng)),
        ("unrelated", unrelated_pairs(held_out, rng)),
    ):
        a = service.embed_texts([x for x, _ in pairs]).vectors
        b = service.embed_texts([y for _, y in pairs]).vectors
        result[f"{name}_pairs"] = len(pairs)
        result[f"{name}_mean_cosine"] = round(float(np.mean(np.sum(a * b, axis=1))), 4)
    return result


def main() -> None:
    started = time.perf_counter()
    import numpy as np
    import siglip_text
    import torch
    import transformers
    from siglip_text.cli import main as cli
    from siglip_text.settings import load_service, load_settings
    from transformers import PreTrainedTokenizerFast

    if not Path(siglip_text.__file__).resolve().is_relative_to(ROOT / "handler"):
        sys.exit(
            f"siglip_text is imported from {siglip_text.__file__}, not from this checkout: "
            f"pip install -e {ROOT} first (the demo is made by this checkout's export)"
        )
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    tokenizer = checkpoint_tokenizer(train_tokenizer())
    model = build_model(len(tokenizer))
    began = time.perf_counter()
    losses = train(model, tokenizer)
    train_s = time.perf_counter() - began

    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = Path(tmp) / "synthetic-demo-tiny"
        model.save_pretrained(checkpoint)
        tokenizer.save_pretrained(checkpoint)
        # The checkpoint's "commit": a digest of its files (deterministic, like the weights).
        digest = hashlib.sha1()
        for path in sorted(checkpoint.iterdir()):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
        revision = digest.hexdigest()
        DEMO_DIR.mkdir(parents=True, exist_ok=True)
        for stale in DEMO_DIR.iterdir():
            stale.unlink()
        # `siglip-text export`, the production command, run in this process (torch is loaded).
        os.environ["SOURCE_DATE_EPOCH"] = SOURCE_DATE_EPOCH
        with contextlib.redirect_stdout(sys.stderr):
            status = cli(
                [
                    "export",
                    str(checkpoint),
                    "--repository",
                    REPOSITORY,
                    "--revision",
                    revision,
                    # one plain fp32 graph file: the raw material tests quantize, optimize
                    # and corrupt
                    "--precision",
                    "fp32",
                    "--single-file",
                    "--no-optimize",
                    "--plain-graph",
                    "--threads",
                    "1",
                    "--out",
                    str(DEMO_DIR),
                    "--force",
                ]
            )
        if status != 0:
            sys.exit(f"siglip-text export failed (exit status {status})")

    tokenizer_path = DEMO_DIR / "tokenizer.json"
    hf = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_file=str(tokenizer_path),
        pad_token="<pad>",
        eos_token="<eos>",
        bos_token="<bos>",
        unk_token="<unk>",
    )
    encoded = hf(EDGE_CASES, padding="max_length", max_length=MAX_LENGTH, truncation=True)[
        "input_ids"
    ]
    with torch.no_grad():
        pooled = model(input_ids=torch.tensor(encoded)).pooler_output.numpy().astype(np.float64)
    unit = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
    cases = [
        {"text": text, "input_ids": ids, "embedding": [float(x) for x in vec]}
        for text, ids, vec in zip(EDGE_CASES, encoded, unit, strict=True)
    ]
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    FIXTURE.write_text(
        json.dumps(
            {
                "model": REPOSITORY,
                "revision": revision,
                "max_length": MAX_LENGTH,
                "made_with": {
                    "transformers": transformers.__version__,
                    "torch": torch.__version__,
                },
                "cases": cases,
            },
            ensure_ascii=True,
            indent=1,
        )
        + "\n"
    )

    service = load_service(load_settings(model_dir=DEMO_DIR, ort_intra_op_threads=1))
    meaning = measure_meaning(service)
    sizes = {p.name: p.stat().st_size for p in sorted(DEMO_DIR.iterdir())}
    print(
        json.dumps(
            {
                "demo": sizes,
                "total_bytes": sum(sizes.values()),
                "cases": len(cases),
                "loss_first_last": [round(losses[0], 3), round(losses[-1], 3)],
                **meaning,
                "train_s": round(train_s, 1),
                "total_s": round(time.perf_counter() - started, 1),
            }
        )
    )
    if not (
        meaning["paraphrase_mean_cosine"] > PARAPHRASE_MIN
        and meaning["unrelated_mean_cosine"] < UNRELATED_MAX
    ):
        sys.exit(
            f"the demo's vectors do not carry enough meaning: paraphrases must be above "
            f"{PARAPHRASE_MIN}, unrelated captions below {UNRELATED_MAX}"
        )


if __name__ == "__main__":
    main()
