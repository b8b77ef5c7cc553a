#!/usr/bin/env python3
"""Builds the `sluice` wheel from a `sluice` binary cargo already built.

    python3 scripts/build_wheel.py BINARY OUT_DIR      -> prints the wheel's path

The wheel holds the Python module (python/sluice/) and the binary, stripped,
as a script (installed on the environment's PATH, where the module looks for
it). maturin's `bindings = "bin"` (python/pyproject.toml, for `pip install
./python`) makes the same layout but compiles the binary again; this script
packs the one already built, so a release or CI pays for one compile.

The platform tag is `linux_<machine>`: pip installs the file directly; it
is not meant for an index (that needs manylinux auditing).
"""

import base64
import hashlib
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def version() -> str:
    """The workspace's version, from the root Cargo.toml."""
    text = (ROOT / "Cargo.toml").read_text()
    section = text.split("[workspace.package]", 1)[1]
    return re.search(r'^version\s*=\s*"([^"]+)"', section, re.M).group(1)


def metadata(version: str) -> str:
    pyproject = (ROOT / "python" / "pyproject.toml").read_text()
    summary = re.search(r'^description\s*=\s*"([^"]+)"', pyproject, re.M).group(1)
    return (
        "Metadata-Version: 2.1\n"
        "Name: sluice\n"
        f"Version: {version}\n"
        f"Summary: {summary}\n"
        "License: Apache-2.0\n"
        "Requires-Python: >=3.9\n"
        "Requires-Dist: pyarrow>=14\n"
        "Provides-Extra: pandas\n"
        "Requires-Dist: pandas>=2; extra == 'pandas'\n"
        "Provides-Extra: polars\n"
        "Requires-Dist: polars>=1; extra == 'polars'\n"
    )


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def add(archive: zipfile.ZipFile, records: list, name: str, data: bytes, mode: int) -> None:
    info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
    info.external_attr = (0o100000 | mode) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    archive.writestr(info, data)
    records.append(record_line(name, data))


def stripped(binary: Path, work: Path) -> bytes:
    out = work / "sluice"
    strip = shutil.which("strip")
    if strip is None:
        sys.exit("build_wheel: `strip` is missing (binutils)")
    subprocess.run([strip, "--strip-debug", "-o", str(out), str(binary)], check=True)
    return out.read_bytes()


def build(binary: Path, out_dir: Path) -> Path:
    ver = version()
    tag = f"py3-none-linux_{platform.machine()}"
    dist_info = f"sluice-{ver}.dist-info"
    out_dir.mkdir(parents=True, exist_ok=True)
    wheel = out_dir / f"sluice-{ver}-{tag}.whl"
    records: list = []
    with tempfile.TemporaryDirectory() as work, zipfile.ZipFile(wheel, "w") as archive:
        for source in sorted((ROOT / "python" / "sluice").rglob("*.py")):
            name = source.relative_to(ROOT / "python").as_posix()
            add(archive, records, name, source.read_bytes(), 0o644)
        add(archive, records, f"sluice-{ver}.data/scripts/sluice", stripped(binary, Path(work)), 0o755)
        add(archive, records, f"{dist_info}/METADATA", metadata(ver).encode(), 0o644)
        wheel_text = f"Wheel-Version: 1.0\nGenerator: sluice build_wheel.py\nRoot-Is-Purelib: false\nTag: {tag}\n"
        add(archive, records, f"{dist_info}/WHEEL", wheel_text.encode(), 0o644)
        records.append(f"{dist_info}/RECORD,,")
        add(archive, [], f"{dist_info}/RECORD", ("\n".join(records) + "\n").encode(), 0o644)
    return wheel


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    binary, out_dir = Path(sys.argv[1]), Path(sys.argv[2])
    if not os.access(binary, os.X_OK):
        sys.exit(f"build_wheel: no executable at {binary}: build it first (cargo build --release -p sluice-cli)")
    print(build(binary, out_dir))


if __name__ == "__main__":
    main()
