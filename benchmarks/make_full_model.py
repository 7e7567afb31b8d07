#!/usr/bin/env python3
"""A full-size SigLIP 2 text tower with random weights, exported fp32 and int8. Export extra.

    pip install torch==2.13.0 -e '.[export]'
    python -m benchmarks.make_full_model                 # base: ~1.1 GB fp32, ~0.3 GB int8
    python -m benchmarks.make_full_model --size large    # external data (> 2 GB)

No weights are downloaded: the checkpoint is the real architecture of the SigLIP 2 text
tower (vocabulary 256,000, 64 positions; base: hidden 768, 12 layers, MLP 3072, 12 heads)
with seeded random weights, saved with ``save_pretrained`` as a ``SiglipModel`` (the image
tower is a one-layer stub: only the text tower is exported), and a Gemma-size tokenizer
built here: a 256,000-entry BPE with byte fallback, ``<pad>``=0 ``<eos>``=1 ``<bos>``=2
``<unk>``=3 and the 256 ``<0xXX>`` byte tokens, whose merges are generated directly (no
training), so it has Gemma's size and cost, not its vocabulary.

Everything goes to a cache outside the repository (default ``~/.cache/siglip-text/bench``,
or ``--cache`` / ``$SIGLIP_BENCH_CACHE``); a second run reuses what is there. The bundles
are ``<cache>/bundles/siglip2-<size>-random-<precision>``; the script prints their sizes,
export times and the int8 fidelity from the manifests, as JSON.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from siglip_text.engine.bundle import load_manifest
from siglip_text.tools.texts import MAX_LENGTH

ROOT = Path(__file__).resolve().parents[1]
SEED = 20261201
VOCAB_SIZE = 256_000
#: A stand-in commit SHA (the manifest requires one): sha1 of the script's purpose.
REVISION = hashlib.sha1(b"siglip-text random-weight benchmark model").hexdigest()

#: The text towers of the SigLIP 2 checkpoints (big_vision / transformers configs).
SIZES = {
    "base": {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12, "heads": 12},
    "large": {"hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 24, "heads": 16},
    "so400m": {
        "hidden_size": 1152,
        "intermediate_size": 4304,
        "num_hidden_layers": 27,
        "heads": 16,
    },
    # giant-opt: so400m's text tower with a wider head (1536-d output; CONTRACT section 6)
    "giant-opt": {
        "hidden_size": 1152,
        "intermediate_size": 4304,
        "num_hidden_layers": 27,
        "heads": 16,
        "projection": 1536,
    },
    # so400m's width with 3 layers: the token table dominates, as in every size; a quick
    # way to see how the export's memory scales (benchmarks/export_memory.py)
    "so400m-3layer": {
        "hidden_size": 1152,
        "intermediate_size": 4304,
        "num_hidden_layers": 3,
        "heads": 16,
    },
}

SPECIAL = ["<pad>", "<eos>", "<bos>", "<unk>"]
# Letters by rough English frequency; other scripts get a share of the merges.
LATIN = "eeeeeeeeeeeetttttttttaaaaaaaaoooooooiiiiiiinnnnnnnsssssshhhhhhrrrrrrdddllllcccuuummwwffggyyppbbvkjxqz"
SCRIPTS = {
    "latin": (0.72, LATIN),
    "cyrillic": (0.07, "абвгдежзийклмнопрстуфхцчшщъыьэюяоооеееааа"),
    "greek": (0.03, "αβγδεζηθικλμνξοπρστυφχψωςάέήίόύώ"),
    "cjk": (0.10, "".join(chr(c) for c in range(0x4E00, 0xA000))),
    "kana": (
        0.03,
        "".join(chr(c) for c in range(0x3041, 0x3097))
        + "".join(chr(c) for c in range(0x30A1, 0x30FB)),
    ),
    "hangul": (0.03, "".join(chr(c) for c in range(0xAC00, 0xAC00 + 1500))),
    "arabic": (0.01, "".join(chr(c) for c in range(0x0621, 0x064B))),
    "hebrew": (0.01, "".join(chr(c) for c in range(0x05D0, 0x05EB))),
}


#: Common words, made whole tokens (with and without the word-start mark) before the
#: generated merges, so that everyday text tokenizes into words as with Gemma.
COMMON_WORDS = (
    "the of and a to in is you that it he was for on are as with his they i at be this "
    "have from or one had by word but not what all were we when your can said there use "
    "an each which she do how their if will up other about out many then them these so "
    "some her would make like him into time has look two more write go see number no way "
    "could people my than first water been call who oil its now find long down day did "
    "get come made may part photo picture image cat dog bird car red blue green yellow "
    "black white small large old new wooden metal man woman child person playing running "
    "sitting standing holding three several table kitchen street beach mountain river "
    "city night sunset tree flower house window door chair book cup bottle phone computer "
    "screen camera video frame scene close view robot arm block train boat plane bicycle "
    "road park garden snow rain"
)


def default_cache() -> Path:
    return Path(os.environ.get("SIGLIP_BENCH_CACHE", "~/.cache/siglip-text/bench")).expanduser()


def build_tokenizer(vocab_size: int = VOCAB_SIZE, *, seed: int = SEED) -> Any:
    """A Gemma-style BPE of exactly ``vocab_size`` entries, its merges generated directly.

    Ids: the four specials, the 256 byte tokens, every character of the alphabets (Latin,
    Cyrillic, Greek, all CJK ideographs, kana, Hangul, Arabic, Hebrew), then the merges'
    tokens. Merges are learned word by word as BPE training would (see ``learn``): common
    English words first, then random pseudo-words of each script, until the vocabulary is
    full. Tokenizing is BPE with Gemma's settings: spaces become "▁", no pre-tokenizer, byte
    fallback.
    """
    from tokenizers import Tokenizer, decoders, models, normalizers, processors

    rng = random.Random(seed)
    vocab: dict[str, int] = {}
    for token in SPECIAL + [f"<0x{b:02X}>" for b in range(256)]:
        vocab[token] = len(vocab)
    alphabet = ["▁"] + [chr(c) for c in range(33, 127)]
    alphabet += [chr(c) for c in range(0xC0, 0x180) if chr(c).isalpha()]
    for _, letters in SCRIPTS.values():
        alphabet += list(letters)
    for char in dict.fromkeys(alphabet):
        if char not in vocab:
            vocab[char] = len(vocab)
    merges: list[tuple[str, str]] = []
    ranks: dict[tuple[str, str], int] = {}

    def learn(word: str) -> None:
        """Merge the word's current BPE pieces left to right until it is one token.

        New merges rank after every existing one, so the word's pieces under the earlier
        merges are a fixed point and the new merges then apply in order: the word becomes
        reachable, as in BPE training.
        """
        pieces = _bpe(list(word), ranks)
        while len(pieces) > 1 and len(vocab) < vocab_size:
            left, right = pieces[0], pieces[1]
            ranks[(left, right)] = len(merges)
            merges.append((left, right))
            vocab.setdefault(left + right, len(vocab))
            pieces[0:2] = [left + right]

    for word in COMMON_WORDS.split():
        learn("▁" + word)
        learn(word)
    names = list(SCRIPTS)
    weights = [SCRIPTS[n][0] for n in names]
    while len(vocab) < vocab_size:
        letters = SCRIPTS[rng.choices(names, weights)[0]][1]
        length = min(2 + int(rng.expovariate(0.45)), 12)
        word = "".join(rng.choice(letters) for _ in range(length))
        learn("▁" + word if rng.random() < 0.6 else word)
    tokenizer = Tokenizer(
        models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True)
    )
    tokenizer.normalizer = normalizers.Replace(" ", "▁")
    tokenizer.decoder = decoders.Sequence(
        [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
    )
    tokenizer.post_processor = processors.TemplateProcessing(
        single="$A <eos>", pair="$A $B <eos>", special_tokens=[("<eos>", 1)]
    )
    for i, token in enumerate(SPECIAL):
        assert tokenizer.token_to_id(token) == i, token
    assert tokenizer.get_vocab_size() == vocab_size
    return tokenizer


def _bpe(pieces: list[str], ranks: dict[tuple[str, str], int]) -> list[str]:
    """Apply the lowest-ranked merge present until none applies (BPE's rule)."""
    while len(pieces) > 1:
        best = min(
            (
                (ranks.get((a, b)), i)
                for i, (a, b) in enumerate(zip(pieces, pieces[1:], strict=False))
            ),
            key=lambda item: (item[0] is None, item[0] or 0),
        )
        if best[0] is None:
            break
        i = best[1]
        pieces[i : i + 2] = [pieces[i] + pieces[i + 1]]
    return pieces


def real_tokenizer(path: Path) -> Any:
    """A real Gemma ``tokenizer.json`` (e.g. ``../shared/fixtures/gemma-tokenizer``) made
    consistent with SigLIP 2: ``$A <eos>`` instead of Gemma's ``<bos> $A`` (what a
    transformers 4 ``save_pretrained`` of the SigLIP 2 tokenizer writes)."""
    from tokenizers import Tokenizer, processors

    tokenizer = Tokenizer.from_file(str(path))
    eos = tokenizer.token_to_id("<eos>")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="$A <eos>", pair="$A $B <eos>", special_tokens=[("<eos>", eos)]
    )
    return tokenizer


def build_checkpoint(
    directory: Path, size: str, *, seed: int = SEED, tokenizer_file: Path | None = None
) -> None:
    """save_pretrained of a SiglipModel: the real text tower, a stub image tower; the
    tokenizer built here, or the real one at ``tokenizer_file``."""
    import torch
    from transformers import PreTrainedTokenizerFast, SiglipConfig, SiglipModel

    began = time.perf_counter()
    tokenizer = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=real_tokenizer(tokenizer_file) if tokenizer_file else build_tokenizer(),
        pad_token="<pad>",
        eos_token="<eos>",
        bos_token="<bos>",
        unk_token="<unk>",
    )
    print(f"[full-model] tokenizer: {time.perf_counter() - began:.1f} s", file=sys.stderr)
    shape = SIZES[size]
    torch.manual_seed(seed)
    config = SiglipConfig(
        text_config={
            "vocab_size": VOCAB_SIZE,
            "hidden_size": shape["hidden_size"],
            "intermediate_size": shape["intermediate_size"],
            "num_hidden_layers": shape["num_hidden_layers"],
            "num_attention_heads": shape["heads"],
            "max_position_embeddings": MAX_LENGTH,
            "projection_size": shape.get("projection", shape["hidden_size"]),
            "hidden_act": "gelu_pytorch_tanh",
            "layer_norm_eps": 1e-6,
            "pad_token_id": 0,
            "eos_token_id": 1,
            "bos_token_id": 2,
        },
        vision_config={
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "image_size": 32,
            "patch_size": 16,
        },
    )
    began = time.perf_counter()
    model = SiglipModel(config).eval()  # type: ignore[no-untyped-call]
    with torch.no_grad():
        # Initialization leaves LayerNorms at identity and biases at zero; give them values
        # so that a bug in any of them shows up in the export check.
        for param in model.parameters():
            if param.ndim == 1:
                param.add_(torch.randn_like(param) * 0.05)
        model.logit_scale.fill_(math.log(10.0))
        model.logit_bias.fill_(-10.0)
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    params = sum(p.numel() for p in model.text_model.parameters())
    print(
        f"[full-model] {size} text tower: {params / 1e6:.1f} M parameters, saved in "
        f"{time.perf_counter() - began:.1f} s to {directory}",
        file=sys.stderr,
    )


def export_command(
    checkpoint: Path, out: Path, *, precision: str, size: str, extra: tuple[str, ...] = ()
) -> list[str]:
    """The ``siglip-text export`` command line of a benchmark bundle, run as a child process
    (``extra``: more export options)."""
    return [
        sys.executable,
        "-m",
        "siglip_text.cli",
        "export",
        str(checkpoint),
        "--out",
        str(out),
        "--repository",
        f"siglip-text/bench-siglip2-{size}-RANDOM-WEIGHTS",
        "--revision",
        REVISION,
        "--precision",
        precision,
        "--force",
        *extra,
    ]


def export(checkpoint: Path, out: Path, *, precision: str, size: str) -> float:
    """``siglip-text export`` in a child process; returns its wall time in seconds."""
    command = export_command(checkpoint, out, precision=precision, size=size)
    print(f"[full-model] {' '.join(command[2:])}", file=sys.stderr)
    began = time.perf_counter()
    # The child's report goes to stderr: this script's stdout is its JSON alone.
    subprocess.run(
        command, check=True, env={**os.environ, "PYTHONWARNINGS": "ignore"}, stdout=sys.stderr
    )
    return time.perf_counter() - began


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="base")
    parser.add_argument(
        "--cache", type=Path, default=None, help="default ~/.cache/siglip-text/bench"
    )
    parser.add_argument(
        "--precision", action="append", choices=["fp32", "int8"], help="default: both"
    )
    parser.add_argument("--force", action="store_true", help="rebuild and re-export")
    parser.add_argument(
        "--tokenizer",
        type=Path,
        default=os.environ.get("SIGLIP_BENCH_TOKENIZER") or None,
        help="a real Gemma tokenizer.json to use instead of the generated one (default "
        "$SIGLIP_BENCH_TOKENIZER); its checkpoint and bundles get a '-gemma' suffix",
    )
    args = parser.parse_args(argv)
    cache = (args.cache or default_cache()).expanduser().resolve()
    if cache.is_relative_to(ROOT):
        parser.error(f"--cache {cache} is inside the repository; use a directory outside it")
    name = f"siglip2-{args.size}-random" + ("-gemma" if args.tokenizer else "")
    checkpoint = cache / "checkpoints" / name
    if args.force or not (checkpoint / "model.safetensors").is_file():
        build_checkpoint(checkpoint, args.size, tokenizer_file=args.tokenizer)
    else:
        print(f"[full-model] reusing {checkpoint}", file=sys.stderr)
    results: dict[str, object] = {"size": args.size, "checkpoint": str(checkpoint)}
    for precision in args.precision or ["fp32", "int8"]:
        out = cache / "bundles" / f"{name}-{precision}"
        record: dict[str, object] = {"bundle": str(out)}
        if args.force or not (out / "manifest.json").is_file():
            record["export_wall_s"] = round(
                export(checkpoint, out, precision=precision, size=args.size), 1
            )
        else:
            print(f"[full-model] reusing {out}", file=sys.stderr)
        manifest = load_manifest(out / "manifest.json")
        sizes = {name: entry.size or 0 for name, entry in manifest.files.items()}
        record["export_s"] = manifest.export_seconds
        record["files_mb"] = {name: round(size / 1e6, 1) for name, size in sizes.items()}
        record["total_mb"] = round(sum(sizes.values()) / 1e6, 1)
        if manifest.export_check is not None:
            record["vs_pytorch"] = manifest.export_check.vs_pytorch.model_dump(exclude_none=True)
        if manifest.fidelity is not None:
            record["int8_vs_fp32"] = {
                "cosine": manifest.fidelity.cosine.model_dump(exclude_none=True),
                "top10_overlap": manifest.fidelity.top10_overlap.model_dump(exclude_none=True),
                "corpus_mean_pairwise_cosine": manifest.fidelity.corpus_mean_pairwise_cosine,
            }
        results[precision] = record
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
