"""The sharding tests need 8 devices: `.ci/run` runs this folder in its own pytest
process with XLA_FLAGS=--xla_force_host_platform_device_count=8 (the flag must be
set before jax starts its CPU backend, hence a separate process)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import jax
import pytest

jax.config.update("jax_enable_x64", True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if jax.device_count() >= 8:
        return
    skip = pytest.mark.skip(reason="needs 8 devices: run with XLA_FLAGS=--xla_force_host_platform_device_count=8")
    # The hook sees every item of the session, not only this folder's: mark only
    # this folder's, so `pytest tests` without the flag still runs the rest.
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(skip)


@pytest.fixture
def use_partitioner() -> Iterator[Callable[[str], None]]:
    """``use_partitioner("shardy" | "gspmd")`` switches jax's partitioner for one test."""
    old = jax.config.jax_use_shardy_partitioner

    def use(name: str) -> None:
        jax.config.update("jax_use_shardy_partitioner", name == "shardy")

    yield use
    jax.config.update("jax_use_shardy_partitioner", old)
