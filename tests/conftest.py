"""Shared fixtures. Tests run against the embedded PostgreSQL under var/test (see Makefile)."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

os.environ.setdefault("PMEM_DATA_DIR", str(Path(__file__).resolve().parent.parent / "var" / "test"))

import pytest  # noqa: E402

_names = itertools.count(1)


@pytest.fixture
def make_namespace(db):
    from memory.services import namespace_create

    def make(prefix: str = "ns"):
        return namespace_create(name=f"{prefix}-{os.getpid()}-{next(_names)}")

    return make


@pytest.fixture
def ns(make_namespace):
    return make_namespace()
