"""Writes the SigLIP 2 contract into a ``tokenizers.Tokenizer`` (used by export and the demo).

Kept free of torch and transformers: it needs only ``tokenizers``.
"""

from __future__ import annotations

import string
from typing import Literal

from tokenizers import Regex, Tokenizer, normalizers, processors

Lowercase = Literal["unicode", "ascii", "none"]
LOWERCASE_CHOICES: tuple[Lowercase, ...] = ("unicode", "ascii", "none")


#: Python's ``str.lower`` maps a capital sigma to the final form when it ends a word
#: (Unicode's Final_Sigma context: a cased letter before it, none after it, case-ignorable
#: characters skipped); the ``Lowercase`` normalizer maps every sigma to the medial form.
_CASED = r"[\p{Cased}&&\P{Case_Ignorable}]"
FINAL_SIGMA = rf"(?<={_CASED}\p{{Case_Ignorable}}*)Σ(?!\p{{Case_Ignorable}}*{_CASED})"


def lowercase_normalizer(mode: Lowercase) -> normalizers.Normalizer | None:
    """``unicode``: ``str.lower``; ``ascii``: A-Z only, as big_vision's ``tf.strings.lower``.

    ``unicode`` equals ``str.lower`` (final sigma included) for every character the two
    Unicode versions (Python's and the Rust library's) both know.
    """
    if mode == "unicode":
        return normalizers.Sequence(
            [normalizers.Replace(Regex(FINAL_SIGMA), "ς"), normalizers.Lowercase()]
        )
    if mode == "ascii":
        return normalizers.Sequence(
            [normalizers.Replace(upper, upper.lower()) for upper in string.ascii_uppercase]
        )
    if mode == "none":
        return None
    raise ValueError(f"lowercase must be one of {LOWERCASE_CHOICES}, got {mode!r}")


def apply_contract(tokenizer: Tokenizer, *, lowercase: Lowercase, max_length: int) -> Tokenizer:
    """Lowercasing before the checkpoint's own normalizer; ``$A <eos>``; pad/truncate to L.

    The serving code ignores the stored padding, truncation and post-processor and applies
    the rule itself; they are written so that other consumers of this ``tokenizer.json``
    (for example ``PreTrainedTokenizerFast``) produce the same ids.
    """
    steps = []
    lower = lowercase_normalizer(lowercase)
    if lower is not None:
        steps.append(lower)
    if tokenizer.normalizer is not None:
        steps.append(tokenizer.normalizer)
    tokenizer.normalizer = normalizers.Sequence(steps) if steps else None
    eos_id = tokenizer.token_to_id("<eos>")
    pad_id = tokenizer.token_to_id("<pad>")
    if eos_id is None or pad_id is None:
        raise ValueError("tokenizer has no <eos> or <pad> token; it is not a SigLIP 2 tokenizer")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="$A <eos>", pair="$A $B <eos>", special_tokens=[("<eos>", eos_id)]
    )
    tokenizer.enable_truncation(max_length=max_length)
    tokenizer.enable_padding(direction="right", pad_id=pad_id, pad_token="<pad>", length=max_length)
    return tokenizer
