"""Parity measures: cosine stats, top-k overlap, and the naming of token-id mistakes."""

from __future__ import annotations

import numpy as np
import pytest
from siglip_text.engine.service import EmbeddingService
from siglip_text.tools.parity import (
    compare_vectors,
    explain_id_mismatch,
    id_mismatches,
    top_k,
    topk_overlap,
)

PAD, EOS, BOS = 0, 1, 2
L = 8


def right_padded(content: list[int]) -> list[int]:
    row = content + [EOS]
    return row + [PAD] * (L - len(row))


def explain(ours: list[int], ref: list[int], **kwargs: object) -> str:
    return explain_id_mismatch(ours, ref, pad_id=PAD, eos_id=EOS, bos_id=BOS, **kwargs)  # type: ignore[arg-type]


def test_reference_padded_with_eos_id_is_named_as_pad_id_1() -> None:
    ours = right_padded([10, 11])

    assert explain(ours, [10, 11] + [EOS] * 6).startswith("pads with id 1 = <eos>")


def test_reference_padded_with_another_id_names_that_id() -> None:
    ours = right_padded([10, 11])

    assert explain(ours, [10, 11, EOS] + [7] * 5).startswith("pads with id 7,")


def test_left_padded_reference_is_named_left_padding() -> None:
    ours = right_padded([10, 11, 12])

    assert explain(ours, [PAD] * 4 + [10, 11, 12, EOS]).startswith("left padding")


def test_left_padding_with_eos_names_both_mistakes() -> None:
    ours = right_padded([10, 11])

    reason = explain(ours, [EOS] * 5 + [10, 11, EOS])

    assert "left padding" in reason and "pads with id 1" in reason


def test_reference_padded_to_the_longest_text_is_named_by_its_length() -> None:
    assert "reference has 4 ids, not 8" in explain(right_padded([10]), [10, EOS, PAD, PAD])


def test_reference_with_bos_is_named() -> None:
    ours = right_padded([10, 11])

    assert (
        explain(ours, [BOS, 10, 11, EOS, PAD, PAD, PAD, PAD])
        == "adds <bos> (the contract has none)"
    )


def test_truncation_that_drops_eos_is_named_not_sticky() -> None:
    ours = [10, 11, 12, 13, 14, 15, 16, EOS]

    assert "sticky" in explain(ours, [10, 11, 12, 13, 14, 15, 16, 17])


def test_reference_without_eos_is_named() -> None:
    assert "no <eos> appended" in explain(right_padded([10, 11]), [10, 11] + [PAD] * 6)


@pytest.mark.parametrize(
    ("ours_text", "ref_text", "named"),
    [
        ("a photo", "A Photo", "not lowercased"),
        ("école", "École", "non-ASCII capitals"),
        ("École", "école", "lowercases letters that this bundle keeps"),
    ],
)
def test_case_differences_are_named_from_the_decoded_texts(
    ours_text: str, ref_text: str, named: str
) -> None:
    texts = {20: ours_text, 30: ref_text}

    reason = explain(
        right_padded([20]), right_padded([30]), decode=lambda ids: "".join(texts[i] for i in ids)
    )

    assert named in reason


def test_unexplained_difference_names_the_first_differing_position() -> None:
    assert "ids differ from position 1" in explain(right_padded([10, 11]), right_padded([10, 12]))


def test_compare_vectors_reports_cosine_and_largest_component_error() -> None:
    ours = np.array([[1.0, 0.0], [0.0, 2.0]])
    reference = np.array([[1.0, 0.0], [1.0, 1.0]])

    stats = compare_vectors(ours, reference)

    assert stats.cosine_min == pytest.approx(np.sqrt(0.5))
    assert stats.cosine_mean == pytest.approx((1 + np.sqrt(0.5)) / 2)
    assert stats.max_abs_error == pytest.approx(np.sqrt(0.5))
    assert stats.worst_index == 1


def test_top_k_overlap_counts_shared_items_of_each_query() -> None:
    corpus = np.eye(4)
    reference = np.array([[4.0, 3.0, 2.0, 1.0]])
    ours = np.array([[4.0, 1.0, 2.0, 3.0]])  # top-2: {0, 3} against {0, 1}

    stats = topk_overlap(ours, reference, corpus, k=2)

    assert stats.mean == 0.5 and stats.min == 0.5 and stats.top1_agreement == 1.0


def test_top_k_orders_best_first() -> None:
    assert top_k(np.array([[0.1, 0.9, 0.5]]), 2).tolist() == [[1, 2]]


def test_id_mismatches_lists_only_the_texts_whose_ids_differ_each_with_its_reason(
    service: EmbeddingService,
) -> None:
    # GIVEN the demo tokenizer's ids for two texts, and a reference that pads the second
    # with id 1 (SigLIP 1's mistake)
    tokenizer = service.tokenizer
    texts = ["a red block", "a blue ball"]
    ours = tokenizer.encode_texts(texts).ids.tolist()
    padded_with_eos = [id_ if id_ != tokenizer.pad_id else tokenizer.eos_id for id_ in ours[1]]

    # WHEN compared
    found = id_mismatches(tokenizer, texts, ours, [ours[0], padded_with_eos])

    # THEN only the second text is listed, its reason named
    assert [text for text, _ in found] == ["a blue ball"]
    assert found[0][1].startswith("pads with id 1")
