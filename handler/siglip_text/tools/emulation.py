"""Running siglip_text on the CPUs Lambda may give, under qemu-user (docs/cpus.md).

- ``haswell``: AVX2 without AVX-512 (``qemu-x86_64-static -cpu Haswell``), the most likely
  Lambda x86_64 CPU and the one whose int8 kernel saturates full-range weights;
- ``sandybridge``: AVX without AVX2 (``-cpu SandyBridge``);
- ``neoverse-n1``: Graviton2, Lambda's arm64 (``qemu-aarch64-static -cpu neoverse-n1``), with
  an arm64 Python root and the image's lock for aarch64 (scripts/make_arm64_root.sh, named
  by ``SIGLIP_ARM64_ROOT`` and ``SIGLIP_ARM64_SITE``). Under qemu-user /proc/cpuinfo is the
  host's x86 text, on which onnxruntime's import crashes: the child runs in a mount
  namespace (``unshare -m``, root) with a Neoverse N1 cpuinfo (`N1_CPUINFO`) bound over it.

The x86 children get the emulated CPU's own cpuinfo the same way when ``unshare -m`` is
allowed (`CPUINFO`; without it they run with the host's text, and init errors name the
host's features): ONNX Runtime picks its x86 kernels from CPUID, which qemu emulates, but
the init's messages name the CPU from /proc/cpuinfo. ``cpuinfo-haswell.txt`` and
``cpuinfo-sandybridge.txt`` are what ``scripts/cpuinfo_from_cpuid.c`` printed under
``qemu-x86_64-static -cpu Haswell`` / ``-cpu SandyBridge``: CPUID's brand string and
feature bits, named as Linux names them.

The results are exact (qemu's TCG computes what the CPU would); the speed is not: a base
tower takes about 5 s a text. Run as a module, this file is the child: it embeds texts with
a bundle on the CPU it runs on and prints JSON (the vectors, or the init error).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

X86_CPUS = {"haswell": "Haswell", "sandybridge": "SandyBridge"}
ARM_CPUS = {"neoverse-n1": "neoverse-n1"}
CPUS = ["native", *X86_CPUS, *ARM_CPUS]
N1_CPUINFO = Path(__file__).with_name("cpuinfo-neoverse-n1.txt")
#: The /proc/cpuinfo text each emulated CPU is shown.
CPUINFO = {
    "haswell": Path(__file__).with_name("cpuinfo-haswell.txt"),
    "sandybridge": Path(__file__).with_name("cpuinfo-sandybridge.txt"),
    "neoverse-n1": N1_CPUINFO,
}
HANDLER = Path(__file__).resolve().parents[2]  # the directory holding siglip_text


def why_not(cpu: str) -> str | None:
    """None when ``cpu`` can run here, else the reason."""
    if cpu == "native":
        return None
    if cpu in X86_CPUS:
        if shutil.which("qemu-x86_64-static") is None:
            return "qemu-x86_64-static is not installed (apt-get install qemu-user-static)"
        return None
    if cpu not in ARM_CPUS:
        return f"unknown CPU {cpu!r} (one of {', '.join(CPUS)})"
    if shutil.which("qemu-aarch64-static") is None:
        return "qemu-aarch64-static is not installed (apt-get install qemu-user-static)"
    root, site = os.environ.get("SIGLIP_ARM64_ROOT"), os.environ.get("SIGLIP_ARM64_SITE")
    if not root or not site or not Path(root, "usr/bin/python3").exists():
        return (
            "no arm64 root: set SIGLIP_ARM64_ROOT and SIGLIP_ARM64_SITE "
            "(scripts/make_arm64_root.sh DIR makes DIR/root and DIR/site)"
        )
    reason = why_no_mount_namespace()
    return f"{reason}: needed to show onnxruntime an N1 cpuinfo" if reason else None


@cache
def why_no_mount_namespace() -> str | None:
    """None when ``unshare -m`` can bind a cpuinfo over /proc/cpuinfo here, else why not."""
    if shutil.which("unshare") is None:
        return "unshare is missing (util-linux)"
    probe = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "true"], capture_output=True, check=False
    )
    if probe.returncode != 0:
        reason = probe.stderr.decode(errors="replace").strip()
        return f"unshare -m is not allowed here (needs root): {reason}"
    return None


def shows_own_cpuinfo(cpu: str) -> bool:
    """Whether a child on ``cpu`` reads that CPU's cpuinfo (`CPUINFO`), not the host's."""
    return cpu == "native" or (cpu in CPUINFO and why_no_mount_namespace() is None)


def python_on(cpu: str, args: list[str], *, path: tuple[Path, ...] = ()) -> list[str]:
    """The command line running ``python ARGS`` on ``cpu``, with ``path`` (and the directory
    of siglip_text) on the module search path."""
    search = [str(p) for p in (HANDLER, *path)]
    if cpu == "native":
        return [sys.executable, *args]
    if cpu in X86_CPUS:
        qemu = shutil.which("qemu-x86_64-static") or "qemu-x86_64-static"
        command = [qemu, "-cpu", X86_CPUS[cpu], sys.executable, *args]
        return _with_cpuinfo(CPUINFO[cpu], command) if shows_own_cpuinfo(cpu) else command
    root, site = os.environ["SIGLIP_ARM64_ROOT"], os.environ["SIGLIP_ARM64_SITE"]
    qemu = shutil.which("qemu-aarch64-static") or "qemu-aarch64-static"
    inner = [
        qemu,
        "-cpu",
        ARM_CPUS[cpu],
        "-L",
        root,
        "-E",
        "PYTHONPATH=" + ":".join([site, *search]),
        "-E",
        "ORT_DISABLE_TELEMETRY=1",
        f"{root}/usr/bin/python3",
        *args,
    ]
    return _with_cpuinfo(N1_CPUINFO, inner)


def _with_cpuinfo(cpuinfo: Path, command: list[str]) -> list[str]:
    """``command`` in a private mount namespace with ``cpuinfo`` bound over /proc/cpuinfo."""
    script = 'mount --bind "$0" /proc/cpuinfo && exec "$@"'
    return ["unshare", "-m", "--propagation", "private", "sh", "-c", script, str(cpuinfo), *command]


def run_python_on(
    cpu: str, args: list[str], *, path: tuple[Path, ...] = (), timeout: float | None = None
) -> str:
    """Run ``python ARGS`` on ``cpu``; its stdout. Raises RuntimeError with its stderr."""
    search = [str(p) for p in (HANDLER, *path)]
    env = {**os.environ, "ORT_DISABLE_TELEMETRY": "1", "PYTHONPATH": ":".join(search)}
    # OpenBLAS must detect the emulated CPU: a core type forced for the host (Haswell, say)
    # runs AVX2 kernels that an emulated SandyBridge lacks (an illegal instruction).
    env.pop("OPENBLAS_CORETYPE", None)
    result = subprocess.run(
        python_on(cpu, args, path=path),
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )
    if result.returncode != 0:
        tail = "\n".join(
            line for line in result.stderr.splitlines() if "TCG doesn't support" not in line
        )
        raise RuntimeError(f"python on {cpu} exited {result.returncode}: {tail[-3000:]}")
    return result.stdout


def embed_on(
    cpu: str,
    bundle: Path,
    texts: list[str],
    *,
    timeout: float | None = None,
    self_check: bool = True,
) -> dict[str, Any]:
    """``{"cpu": description, "vectors": [...]}`` or ``{"cpu": ..., "error": message}``:
    the bundle loaded as serve loads it (self-check included) on ``cpu``. ``self_check=False``
    measures what the CPU computes even where init would refuse the bundle (the int8 kernel
    check and the reference check are skipped, in the child only)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="siglip-emulation-") as scratch:
        request = Path(scratch) / "texts.json"
        request.write_text(json.dumps(texts))
        args = ["-m", "siglip_text.tools.emulation", str(bundle), str(request)]
        out = run_python_on(
            cpu, args + ([] if self_check else ["--no-self-check"]), timeout=timeout
        )
    return dict(json.loads(out.splitlines()[-1]))


def child(bundle: Path, request: Path, *, self_check: bool = True) -> dict[str, Any]:
    """What `embed_on` reads: this CPU, and the vectors or the init error."""
    from ..engine.bundle import load_manifest
    from ..engine.cpu import cpu_description
    from ..engine.errors import SiglipError
    from ..engine.loading import ServiceInit
    from ..settings import load_settings

    texts = json.loads(request.read_text())
    record: dict[str, Any] = {"cpu": cpu_description()}
    if not self_check:
        record["self_check"] = "skipped"
    try:
        settings = load_settings(model_dir=bundle, ort_intra_op_threads=1)
        paths = settings.artifact_paths()
        manifest = load_manifest(paths.manifest)
        config = settings.session_config()
        service = ServiceInit.start_bundle(manifest, paths, config, self_check=self_check).service()
    except SiglipError as exc:
        record["error"] = exc.message
        return record
    vectors = [service.embed_texts(texts[i : i + 8]).vectors for i in range(0, len(texts), 8)]
    record["vectors"] = [row.tolist() for block in vectors for row in block]
    return record


if __name__ == "__main__":
    skip = "--no-self-check" in sys.argv[3:]
    print(json.dumps(child(Path(sys.argv[1]), Path(sys.argv[2]), self_check=not skip)))
