"""The summary ``siglip-text export`` prints for a bundle it wrote."""

from __future__ import annotations

from .pipeline import ExportReport, manifest_pin


def summary(report: ExportReport) -> str:
    manifest = report.manifest
    lines = [f"exported {manifest.repository}@{manifest.revision[:12]} to {report.out}"]
    lines.append(
        f"  precision {manifest.precision}, dimension {manifest.embedding_dimension}, "
        f"lowercase {manifest.lowercase}, opset {manifest.opset}"
    )
    for name, entry in manifest.files.items():
        lines.append(
            f"  {name:<24} {(entry.size or 0) / 1e6:10.1f} MB  sha256 {(entry.sha256 or '')[:16]}"
        )
    if manifest.export_check is not None:
        stats = manifest.export_check.vs_pytorch
        lines.append(
            f"  vs PyTorch ({stats.count} texts): cosine min {stats.cosine_min:.7f} mean "
            f"{stats.cosine_mean:.7f}, max abs error {stats.max_abs_error or 0.0:.2e}; "
            f"tokenizer parity {stats.count}/{stats.count}"
        )
    loaded = manifest.checkpoint_tokenizer
    if loaded is not None and loaded.note:
        lines.append(f"  NOTE: {loaded.note}")
    if loaded is not None and (loaded.special_token_strings or "text") != "text":
        lines.append(
            f"  note: transformers {loaded.transformers} matches special-token strings in "
            "text (a query '<eos>' becomes the control id); this bundle takes them as text, as "
            "SentencePiece does (a pipeline calling the tokenizer passes split_special_tokens=True)"
        )
    fidelity = manifest.fidelity
    if fidelity is not None:
        lines.append(
            f"  int8 vs fp32: cosine min {fidelity.cosine.cosine_min:.6f} mean "
            f"{fidelity.cosine.cosine_mean:.6f}; top-10 overlap mean "
            f"{fidelity.top10_overlap.mean:.3f} min {fidelity.top10_overlap.min:.3f}"
        )
    lines.append(
        f"  manifest sha256 pinned in {manifest_pin(report.out)}: keep it with the deploy "
        "(the image build checks the bundle against it)"
    )
    lines.append("  " + ", ".join(f"{k} {v:.1f}" for k, v in report.timings.items()))
    return "\n".join(lines)
