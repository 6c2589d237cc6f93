"""The sharding tests need 8 devices: `.ci/run` runs this folder in its own pytest
process with XLA_FLAGS=--xla_force_host_platform_device_count=8 (the flag must be
set before jax starts its CPU backend, hence a separate process)."""

from __future__ import annotations

import jax
import pytest

jax.config.update("jax_enable_x64", True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if jax.device_count() >= 8:
        return
    skip = pytest.mark.skip(reason="needs 8 devices: run with XLA_FLAGS=--xla_force_host_platform_device_count=8")
    for item in items:
        item.add_marker(skip)


@pytest.fixture(params=[True, False], ids=["shardy", "gspmd"])
def partitioner(request: pytest.FixtureRequest):
    """Run the test under each partitioner jax offers."""
    old = jax.config.jax_use_shardy_partitioner
    jax.config.update("jax_use_shardy_partitioner", request.param)
    try:
        yield request.param
    finally:
        jax.config.update("jax_use_shardy_partitioner", old)
