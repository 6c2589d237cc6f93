"""The jax versions this package admits, and the warning an import gives outside them.

``pyproject.toml`` admits ``jax>=0.10,<0.13`` (docs/versions.md); pip keeps to that
range, but a jax installed afterwards, with ``--no-deps`` or by another installer can
leave the process on a jax the package was never tested with. Importing the package
then warns, naming both versions, instead of failing later in a way that names neither.

Example:
    >>> from xla_ffi_rs._versions import jax_version_warning
    >>> jax_version_warning("0.12.1") is None
    True
    >>> "jax 0.9.2" in jax_version_warning("0.9.2")
    True
"""

from __future__ import annotations

import re
import warnings

import jax

#: The jax requirement of ``pyproject.toml``, as written there.
JAX_REQUIREMENT = "jax>=0.10,<0.13"
#: The oldest admitted jax minor, and the first minor no longer admitted.
JAX_OLDEST, JAX_FIRST_UNSUPPORTED = (0, 10), (0, 13)


def jax_version_warning(version: str) -> str | None:
    """The warning for jax ``version`` (``jax.__version__``), or None inside the range.

    A version string that does not start with ``MAJOR.MINOR`` is not judged.
    """
    m = re.match(r"(\d+)\.(\d+)", version)
    if m is None:
        return None
    minor = (int(m[1]), int(m[2]))
    if JAX_OLDEST <= minor < JAX_FIRST_UNSUPPORTED:
        return None
    return (
        f"xla_ffi_rs supports {JAX_REQUIREMENT} (the tested versions are in docs/versions.md); this process has "
        f"jax {version}, which it was never tested with: install a supported one, "
        f"e.g. pip install 'jax[cpu]{JAX_REQUIREMENT[3:]}'"
    )


def warn_if_unsupported(version: str | None = None) -> None:
    """Warn (``UserWarning``) when jax ``version`` (by default the imported jax's) is
    outside :data:`JAX_REQUIREMENT`."""
    message = jax_version_warning(jax.__version__ if version is None else version)
    if message is not None:
        warnings.warn(message, UserWarning, stacklevel=2)
