#!/usr/bin/env python3
"""Make the tiny demo bundle and its reference outputs. Needs the ``export`` extra.

    pip install torch==2.13.0 -e '.[export]'
    python scripts/make_demo_bundle.py

Writes, deterministically (fixed seeds):
  handler/siglip_text/demo/{manifest.json,text_model.onnx,tokenizer.json}
      a SigLIP 2 text tower with the real architecture and random weights (hidden 32,
      2 layers), and a small Gemma-style BPE tokenizer trained here (byte fallback,
      <pad>=0 <eos>=1 <bos>=2 <unk>=3, Unicode lowercasing);
  tests/fixtures/demo_reference.json
      for each edge-case text: the ids from Hugging Face's PreTrainedTokenizerFast
      (padding="max_length", max_length=64, truncation, EOS appended, no BOS) and the
      L2-normalized pooled output of the PyTorch model fed those ids (no attention mask).
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "handler"))

DEMO_DIR = ROOT / "handler" / "siglip_text" / "demo"
FIXTURE = ROOT / "tests" / "fixtures" / "demo_reference.json"
MAX_LENGTH = 64
VOCAB_SIZE = 1024
REPOSITORY = "siglip-text/demo-siglip2-tiny-RANDOM-WEIGHTS"
SEED = 20261130

SPECIAL = ["<pad>", "<eos>", "<bos>", "<unk>"]
WORDS = [
    "a",
    "the",
    "photo",
    "picture",
    "image",
    "of",
    "on",
    "in",
    "with",
    "and",
    "dog",
    "cat",
    "bird",
    "car",
    "red",
    "blue",
    "green",
    "yellow",
    "black",
    "white",
    "small",
    "large",
    "robot",
    "arm",
    "block",
    "table",
    "kitchen",
    "street",
    "beach",
    "mountain",
    "river",
    "city",
    "night",
    "day",
    "sunset",
    "person",
    "man",
    "woman",
    "child",
    "playing",
    "running",
    "sitting",
    "standing",
    "holding",
    "two",
    "three",
    "several",
    "old",
    "new",
    "wooden",
    "metal",
    "plastic",
    "glass",
    "bright",
    "dark",
    "cloudy",
    "sunny",
    "snowy",
    "road",
    "bicycle",
    "train",
    "boat",
    "plane",
    "house",
    "tree",
    "flower",
    "garden",
    "park",
    "window",
    "door",
    "chair",
    "sofa",
    "bed",
    "book",
    "cup",
    "bottle",
    "phone",
    "computer",
    "screen",
    "keyboard",
    "camera",
    "video",
    "frame",
    "scene",
    "close",
    "view",
    "café",
    "crème",
    "brûlée",
    "naïve",
    "façade",
    "über",
    "straße",
    "niño",
    "año",
    "garçon",
    "élève",
    "猫",
    "狗",
    "的",
    "照片",
    "一只",
    "城市",
    "夜晚",
    "写真",
    "ねこ",
    "いぬ",
    "사진",
    "고양이",
    "صورة",
    "قطة",
    "كلب",
    "תמונה",
    "של",
    "חתול",
    "фото",
    "кошка",
    "собака",
]
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


def train_tokenizer():
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    rng = random.Random(SEED)
    corpus = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12))) for _ in range(4000)]
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


def build_model(vocab_size: int):
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
    model = Siglip2TextModel(config).eval()
    # Random init leaves LayerNorms at identity and biases at zero; perturb everything so
    # that a bug in any of them shows up in the reference comparison.
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.05)
    return model


def main() -> None:
    import numpy as np
    import torch
    import transformers
    from siglip_text.tools.export.graph import export_text_tower
    from siglip_text.tools.export.tokenizer import apply_contract
    from transformers import PreTrainedTokenizerFast

    DEMO_DIR.mkdir(parents=True, exist_ok=True)
    tokenizer = apply_contract(train_tokenizer(), lowercase="unicode", max_length=MAX_LENGTH)
    tokenizer_path = DEMO_DIR / "tokenizer.json"
    tokenizer.save(str(tokenizer_path))

    vocab = tokenizer.get_vocab_size(with_added_tokens=True)
    model = build_model(vocab)
    onnx_path = DEMO_DIR / "text_model.onnx"
    export_text_tower(model, onnx_path, max_length=MAX_LENGTH)

    revision = hashlib.sha1(onnx_path.read_bytes() + tokenizer_path.read_bytes()).hexdigest()
    manifest = {
        "repository": REPOSITORY,
        "revision": revision,
        "embedding_dimension": model.config.projection_size or model.config.hidden_size,
        "text_max_token_length": MAX_LENGTH,
        "note": "Random weights for demos and tests: its vectors mean nothing.",
        "source": "scripts/make_demo_bundle.py",
        "precision": "fp32",
        "lowercase": "unicode",
    }
    (DEMO_DIR / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")

    hf = PreTrainedTokenizerFast(
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
    sizes = {p.name: p.stat().st_size for p in sorted(DEMO_DIR.iterdir())}
    print(json.dumps({"demo": sizes, "total_bytes": sum(sizes.values()), "cases": len(cases)}))


if __name__ == "__main__":
    main()
