from pathlib import Path

import pytest

import jobqueue as jq

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture
def clock() -> jq.ManualClock:
    """A manual clock at t=0."""
    return jq.ManualClock()
