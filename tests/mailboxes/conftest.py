"""Fixtures for the mailbox tests: a DRF API client and the standard tree, opened."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient


@pytest.fixture
def client():
    """DRF's APIClient (in place of pytest-django's Django test client)."""
    return APIClient()


@pytest.fixture
def opened(open_tree):
    """The standard tree (``tests.conftest.STANDARD_TREE``), opened as OWNER."""
    return open_tree()
