"""What the installed transformers makes of the checkpoint's tokenizer: a record, not a check.

Export writes it into the manifest (``checkpoint_tokenizer``) and prints its ``note``; a
difference from the contract never fails the export (the bundle follows the contract), it
tells the user how a GPU pipeline that calls the tokenizer directly would depart from it.
"""

from __future__ import annotations

from typing import Any

from ...engine.bundle import CheckpointTokenizer, Lowercase
from ..parity import explain_id_mismatch
from ..texts import EDGE_CASE_TEXTS, MAX_LENGTH, SPECIAL_TOKEN_STRINGS


def describe_checkpoint_tokenizer(
    tokenizer: Any, reference: Any, contract: list[list[int]], *, lowercase: Lowercase
) -> CheckpointTokenizer:
    """What the checkpoint tokenizer does as the installed transformers loads it.

    A GPU pipeline that calls it directly, as transformers documents SigLIP 2
    (``tokenizer(text, padding="max_length", max_length=64, truncation=True)``), gets the
    tokenizer's own post-processing, which transformers 4 rebuilt from
    ``add_bos_token``/``add_eos_token`` and transformers 5 takes from ``tokenizer.json``;
    transformers may also build the tokenizer otherwise than the file says (transformers 5
    loads a SigLIP 2 checkpoint's as ``Siglip2Tokenizer``, which lowercases), and Hugging
    Face tokenizers match special-token strings in the text unless
    ``split_special_tokens=True``. Each is compared with the contract on EDGE_CASE_TEXTS
    (``contract``: its ids, from ``reference``, the checkpoint's tokenizer.json as shipped);
    ``note``, present only when the first two differ, says how a GPU pipeline calling it
    would depart from the contract. ``tokenizer`` is the one transformers loaded.
    """
    import transformers

    from .checkpoint import contract_token_ids, direct_call_token_ids

    version = transformers.__version__
    eos, pad = contract[EDGE_CASE_TEXTS.index("")][:2]
    bos = reference.token_to_id("<bos>")

    def decode(ids: list[int]) -> str:
        return str(reference.decode(ids, skip_special_tokens=False))

    def differences(theirs: list[list[int]], ours: list[list[int]]) -> dict[str, int]:
        """Each distinct reason (explain_id_mismatch) and on how many texts it shows."""
        found: dict[str, int] = {}
        for mine, ref in zip(ours, theirs, strict=True):
            if mine != ref:
                why = explain_id_mismatch(
                    mine, ref, pad_id=pad, eos_id=eos, bos_id=bos, decode=decode
                )
                # positions and ids are for a text at a time; here only the kind counts
                reason = "; ".join(
                    "other ids for the text" if part.startswith("ids differ from") else part
                    for part in why.split("; ")
                )
                found[reason] = found.get(reason, 0) + 1
        return found

    # transformers' own ids for the text (nothing added) against tokenizer.json's
    theirs = contract_token_ids(
        tokenizer, EDGE_CASE_TEXTS, lowercase=lowercase, max_length=MAX_LENGTH
    )
    content = differences(theirs, contract)
    # its post-processing and padding, on top of its own ids for the text
    reasons = differences(
        direct_call_token_ids(
            tokenizer, EDGE_CASE_TEXTS, lowercase=lowercase, max_length=MAX_LENGTH
        ),
        theirs,
    )
    special = [
        i for i, t in enumerate(EDGE_CASE_TEXTS) if any(s in t for s in SPECIAL_TOKEN_STRINGS)
    ]
    unsplit = direct_call_token_ids(
        tokenizer,
        [EDGE_CASE_TEXTS[i] for i in special],
        lowercase=lowercase,
        max_length=MAX_LENGTH,
        split_special_tokens=False,
    )
    split = direct_call_token_ids(
        tokenizer, [EDGE_CASE_TEXTS[i] for i in special], lowercase=lowercase, max_length=MAX_LENGTH
    )
    total = len(EDGE_CASE_TEXTS)
    notes = []
    if reasons:
        notes.append(
            f"transformers {version} loads this tokenizer {_post_processing_phrase(reasons)}: a "
            "GPU pipeline that calls it directly does not follow the SigLIP 2 contract (this "
            "bundle does; build that pipeline's ids with add_special_tokens=False, then <eos> "
            "and <pad>, or give the checkpoint a tokenizer.json whose post-processor is "
            "'$A <eos>')"
        )
    if content:
        notes.append(
            f"transformers {version} loads this tokenizer as {type(tokenizer).__name__}, whose "
            f"ids for the text itself differ from tokenizer.json's on {sum(content.values())} "
            f"of {total} texts ({'; '.join(content)}); this bundle follows tokenizer.json"
        )
    return CheckpointTokenizer(
        transformers=version,
        tokenizer_class=type(tokenizer).__name__,
        call=f"tokenizer(text.lower(), padding='max_length', max_length={MAX_LENGTH}, "
        "truncation=True)",
        post_processing=(
            "; ".join(f"{r} ({n} of {total} texts)" for r, n in reasons.items())
            if reasons
            else "follows the contract (no <bos>, <eos> appended, <pad> on the right)"
        ),
        content_ids=(
            "; ".join(f"{r} ({n} of {total} texts)" for r, n in content.items())
            if content
            else "equal to tokenizer.json's"
        ),
        special_token_strings=(
            "matched as control tokens unless split_special_tokens=True"
            if unsplit != split
            else "text"
        ),
        note=". ".join(notes) if notes else None,
    )


def _post_processing_phrase(reasons: dict[str, int]) -> str:
    """``with a leading <bos> and no <eos>`` from explain_id_mismatch's reasons."""
    parts = {part for reason in reasons for part in reason.split("; ")}
    phrases = []
    if any(p.startswith("adds <bos>") for p in parts):
        phrases.append("a leading <bos>")
    if "no <eos> appended" in parts:
        phrases.append("no <eos>")
    elif any(p.startswith("drops <eos>") for p in parts):
        phrases.append("an <eos> that truncation drops")
    rest = [
        p
        for p in sorted(parts)
        if not p.startswith(("adds <bos>", "drops <eos>")) and p != "no <eos> appended"
    ]
    if phrases:
        text = "with " + " and ".join(phrases)
        return text + (f" ({'; '.join(rest)})" if rest else "")
    return "so that " + "; ".join(rest)
