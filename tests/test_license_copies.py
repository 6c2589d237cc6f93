"""The repository has no symbolic link (a Windows checkout without symlink support
gets a one-line text file instead), and each published crate's LICENSE-MIT and
LICENSE-APACHE, which `cargo package` puts in its .crate file, are copies of the
repository's, byte for byte.

To refresh the copies after a licence file changes:
``for d in $(dirname $(git ls-files '*/LICENSE-MIT')); do cp LICENSE-MIT LICENSE-APACHE "$d"; done``
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LICENSES = ("LICENSE-MIT", "LICENSE-APACHE")


def workspace_crates() -> list[Path]:
    """The folders of the root workspace's members that are published (no ``publish = false``)."""
    manifest = (ROOT / "Cargo.toml").read_text(encoding="utf-8")
    found = re.search(r"^members\s*=\s*\[([^\]]*)\]", manifest, re.MULTILINE)
    assert found, "no [workspace] members in Cargo.toml"
    folders = [ROOT / m for m in re.findall(r'"([^"]+)"', found.group(1))]
    return [d for d in folders if not re.search(r"^publish\s*=\s*false", (d / "Cargo.toml").read_text(), re.MULTILINE)]


def test_no_symbolic_links_are_tracked() -> None:
    try:
        staged = subprocess.run(
            ["git", "ls-files", "-s"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    links = [line.split("\t", 1)[1] for line in staged if line.startswith("120000 ")]
    assert not links, f"symbolic links are tracked (Windows checkouts cannot follow them; commit copies): {links}"


@pytest.mark.parametrize("crate", workspace_crates(), ids=lambda d: str(d.relative_to(ROOT)))
def test_each_published_crate_has_the_licences_as_copies(crate: Path) -> None:
    for name in LICENSES:
        copy = crate / name
        assert copy.is_file() and not copy.is_symlink(), f"{copy.relative_to(ROOT)}: missing or a link"
        assert copy.read_bytes() == (ROOT / name).read_bytes(), (
            f"{copy.relative_to(ROOT)} differs from the repository's {name}: copy it again "
            f"(cp {name} {copy.relative_to(ROOT)})"
        )
