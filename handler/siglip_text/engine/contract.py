"""The contract a text vector is made by, as one typed record: what makes it compatible with
an index (docs/contract.md), the document whose canonical JSON the contract fingerprint is
the SHA-256 of (engine/fingerprint.py), and the rules every SigLIP 2 text vector follows,
written here only (`Contract.siglip2`). The bundle's manifest records one
(engine/bundle.py); tools/checkpoint_fingerprint.py builds one from a checkpoint.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt

#: A checkpoint's revision: a full 40-hex commit SHA.
REVISION_PATTERN = r"^[0-9a-fA-F]{40}$"
#: How a contract fingerprint is written: ``sha256:`` and 64 lowercase hex digits.
FINGERPRINT_PATTERN = r"^sha256:[0-9a-f]{64}$"
#: The contract document's format (engine/fingerprint.py); a new format is a new name.
ContractFormat = Literal["siglip-text-contract/1"]
CONTRACT_FORMAT: ContractFormat = "siglip-text-contract/1"
WeightsOf = Literal["checkpoint-text-tower", "onnx-files"]
#: The lowercasing a contract records: "other" for a normalizer that lowercases otherwise.
ContractLowercase = Literal["unicode", "ascii", "none", "other"]

Digest = Annotated[str, Field(pattern=FINGERPRINT_PATTERN)]


class Contract(BaseModel):
    """Everything that makes a text vector compatible with an index: the document whose
    canonical JSON the fingerprint is the SHA-256 of (engine/fingerprint.py; docs/contract.md
    gives every field and the serialization). The same for every precision of one checkpoint:
    nothing in it depends on how the graph was written.

    ``tokenizer`` is the digest of the tokenizer as served (its normalizer with the
    lowercasing, pre-tokenizer, model and added tokens); ``weights`` the digest of what
    ``weights_of`` names: the checkpoint's text tower as the checkpoint stores it, or, for a
    bundle that records no checkpoint, the ONNX files it serves.
    """

    # As every record export writes: typed fields, unknown fields kept as they are.
    model_config = ConfigDict(extra="allow", frozen=True)

    format: ContractFormat
    repository: str = Field(min_length=1)
    revision: str = Field(pattern=REVISION_PATTERN)
    tokenizer: Digest
    lowercase: ContractLowercase
    special_token_strings: Literal["text"]
    bos: Literal["none"]
    eos: Literal["sticky"]
    eos_id: StrictInt = Field(ge=0)
    padding: Literal["right"]
    pad_id: StrictInt = Field(ge=0)
    length: StrictInt = Field(gt=1)
    attention_mask: Literal["none"]
    pooling: Literal["last-position"]
    head: Literal["linear"]
    normalization: Literal["l2"]
    dimension: StrictInt = Field(gt=0)
    weights: Digest
    weights_of: WeightsOf

    @classmethod
    def siglip2(
        cls,
        *,
        repository: str,
        revision: str,
        tokenizer: str,
        lowercase: ContractLowercase,
        eos_id: int,
        pad_id: int,
        length: int,
        dimension: int,
        weights: str,
        weights_of: WeightsOf,
    ) -> Contract:
        """The contract of a SigLIP 2 text tower: what a bundle or a checkpoint gives, with
        the rules every SigLIP 2 vector is made by, written here only. The fields stay
        required when a contract is read (a manifest's record): a record that leaves one
        out is refused, not completed."""
        return cls(
            format=CONTRACT_FORMAT,
            repository=repository,
            revision=revision,
            tokenizer=tokenizer,
            lowercase=lowercase,
            special_token_strings="text",
            bos="none",
            eos="sticky",
            eos_id=eos_id,
            padding="right",
            pad_id=pad_id,
            length=length,
            attention_mask="none",
            pooling="last-position",
            head="linear",
            normalization="l2",
            dimension=dimension,
            weights=weights,
            weights_of=weights_of,
        )
