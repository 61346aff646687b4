"""A sweep with a cadence of its own (a timer) runs apart from the others."""

import pytest

from workforce import sweepers


@pytest.fixture
def isolated(monkeypatch):
    monkeypatch.setattr(sweepers, "_sweeps", {})
    monkeypatch.setattr(sweepers, "_every", {})


@pytest.mark.django_db
def test_run_sweeps_runs_only_the_named_sweeps_in_order(isolated):
    ran = []
    sweepers.register_sweep("a", lambda: ran.append("a"))
    sweepers.register_sweep("b", lambda: ran.append("b"), every=0.5)
    sweepers.register_sweep("c", lambda: ran.append("c"))
    sweepers.run_sweeps(["c", "a"])
    assert ran == ["a", "c"]
    sweepers.run_sweeps()
    assert ran == ["a", "c", "a", "b", "c"]


def test_a_cadence_must_be_positive_and_registering_again_without_one_drops_it(isolated):
    with pytest.raises(ValueError):
        sweepers.register_sweep("t", lambda: None, every=0)
    sweepers.register_sweep("t", lambda: None, every=0.5)
    assert sweepers._every == {"t": 0.5}
    sweepers.register_sweep("t", lambda: None)
    assert sweepers._every == {}
