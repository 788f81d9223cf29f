"""The distributions as a package index gets them: built with ``python -m build`` (an
sdist, then the wheel from it, as ``pip`` would), then opened and read.

The wheel and the sdist carry the Apache-2.0 text; the metadata names the licence and the
classifiers; the description has no link an index page cannot follow (the README's
relative links become plain text); ``python -m zklocks`` and ``py.typed`` ship.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    build = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    return out


def test_the_wheel_and_the_sdist_carry_the_license(dist: Path) -> None:
    license_text = (ROOT / "LICENSE").read_text()
    assert license_text.split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in license_text
    (wheel,) = dist.glob("zklocks-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        licenses = [
            n for n in names if re.fullmatch(r"zklocks-[^/]+\.dist-info/licenses/LICENSE", n)
        ]
        assert len(licenses) == 1, names
        assert archive.read(licenses[0]).decode() == license_text
        assert "zklocks/__main__.py" in names and "zklocks/py.typed" in names
    (sdist,) = dist.glob("zklocks-*.tar.gz")
    with tarfile.open(sdist) as archive:
        top = archive.getnames()[0].split("/")[0]
        member = archive.extractfile(f"{top}/LICENSE")
        assert member is not None and member.read().decode() == license_text


def test_the_metadata_names_the_license_and_links_nothing_an_index_cannot_serve(
    dist: Path,
) -> None:
    (wheel,) = dist.glob("zklocks-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = Parser().parsestr(archive.read(name).decode())
    assert metadata["License-Expression"] == "Apache-2.0"
    classifiers = metadata.get_all("Classifier") or []
    assert "Typing :: Typed" in classifiers
    # only what is tested (CI: Debian 12's 3.11, Debian 13's 3.13); 3.10 is past its end
    assert metadata["Requires-Python"] == ">=3.11"
    versions = [c for c in classifiers if c.startswith("Programming Language :: Python :: 3.")]
    assert versions == [f"Programming Language :: Python :: 3.{v}" for v in (11, 13)]
    assert "Topic :: System :: Distributed Computing" in classifiers
    description = metadata.get_payload()
    assert isinstance(description, str) and description.startswith("# zklocks")
    # every markdown link or image left points somewhere absolute (or within the page)
    targets = re.findall(r"\]\(([^)]*)\)", description)
    assert [t for t in targets if not re.match(r"https?://|#", t)] == []
    assert "docs/cli.md" in description  # the file is still named, as text
