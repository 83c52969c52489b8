"""Fixtures for the `cactus serve` tests (helpers in serverproc.py)."""
import pytest

from serverproc import ServerProcess


@pytest.fixture(scope="session")
def server():
    s = ServerProcess("--parallel", "4", "-t", "2", "--max-queue", "64")
    yield s
    assert s.stop() == 0
