"""Setting a coordinator up (spec 004 "Setting one up"): what hiring refuses in a
coordinator's WORKER.md, naming the problem, and what the flow's options refuse."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from coordinators.checks import check_coordinator_setup
from coordinators.config import configure_coordinator, current_setup, setup_from_settings
from coordinators.constants import DEFAULT_ROUND_DEADLINE_MS
from seats.hiring import HireRefused, hire_problems, hire_workforce
from seats.workers import read_workforce
from tests.coordinators.conftest import ACCOUNTS, DELEGATES, DEVICES, GENERAL, HELP, coordinator_md, desk_tree


def problems(make_tree, **keys) -> list[str]:
    workers, errors = read_workforce(make_tree(desk_tree(**keys)))
    assert errors == []
    return [message for worker, message in hire_problems(workers) if worker == HELP]


def test_a_good_coordinator_is_hired(make_tree, db):
    workers, _ = read_workforce(make_tree(desk_tree(routing="best-fit", fallback=GENERAL, rounds=3)))
    seats = {s.seat_id: s for s in hire_workforce(workers)}
    assert seats[HELP].kind == "coordinator"
    assert seats[HELP].config == {"delegates": list(DELEGATES), "routing": "best-fit", "fallback": GENERAL, "rounds": 3}


@pytest.mark.parametrize(
    "keys, message",
    [
        ({"rounds": 4}, "rounds: 4 is above 3; rounds can be at most 3"),
        ({"rounds": -1}, "rounds: -1 is below 0; rounds can be 0 to 3"),
        (
            {"routing": "smart"},
            'routing: "smart" is not a routing the coordinator knows; it is judgment, best-fit, round-robin or everyone',
        ),
        (
            {"fallback": "support.lead"},
            'fallback: "support.lead" isn\'t one of its delegates: (support.devices, support.accounts, support.general)',
        ),
        ({"delegates": (DEVICES, ACCOUNTS, DEVICES)}, 'delegates: names "support.devices" twice'),
        (
            {"delegates": (DEVICES, "support.ghost")},
            'delegates: names "support.ghost", which is not a worker declared in '
            "your files; a coordinator declared in your files can name only workers "
            "declared in your files",
        ),
    ],
)
def test_hiring_refuses_a_coordinator_it_cant_run_naming_the_problem(make_tree, db, keys, message):
    assert problems(make_tree, **keys) == [message]
    workers, _ = read_workforce(make_tree(desk_tree(**keys)))
    with pytest.raises(HireRefused) as refused:
        hire_workforce(workers)
    assert (HELP, message) in refused.value.problems


def test_more_than_25_delegates_is_refused(make_tree, db):
    files = desk_tree(delegates=[f"support.w{n}" for n in range(26)])
    for n in range(26):
        files[f"teams/support/workers/w{n}/WORKER.md"] = "---\ndescription: A hand.\n---\n\nHelp.\n"
    workers, errors = read_workforce(make_tree(files))
    assert errors == []
    assert (HELP, "delegates: names 26 workers; a coordinator can have at most 25") in hire_problems(workers)


def test_every_problem_is_named_at_once(make_tree, db):
    found = problems(make_tree, rounds=5, routing="fastest", fallback="support.lead")
    assert len(found) == 3


def test_the_round_deadline_defaults_to_five_minutes(db):
    setup = configure_coordinator(route_model="embedded/lexical")
    assert setup.round_deadline_ms == DEFAULT_ROUND_DEADLINE_MS == 300_000
    assert current_setup().delegate_flows == ("agent",)


@pytest.mark.parametrize("value", [0, -1, 1.5, "300000", True, None])
def test_a_round_deadline_that_isnt_a_positive_whole_number_is_refused(value):
    with pytest.raises(ImproperlyConfigured, match="round_deadline_ms must be a positive whole number of milliseconds"):
        configure_coordinator(route_model="embedded/lexical", round_deadline_ms=value)


def test_the_route_model_is_required_even_without_best_fit():
    with pytest.raises(ImproperlyConfigured, match="route_model is required"):
        configure_coordinator(route_model="")


def test_manage_py_check_names_a_bad_round_deadline(settings):
    assert check_coordinator_setup() == []
    settings.WORKFORCE_COORDINATOR_ROUND_DEADLINE_MS = 0
    [error] = check_coordinator_setup()
    assert error.id == "coordinators.E001" and "positive whole number" in error.msg
    assert current_setup().round_deadline_ms == 300_000  # the check leaves the running flow alone


def test_settings_name_the_flows_options(settings):
    settings.WORKFORCE_COORDINATOR_ROUTE_MODEL = ""
    settings.WORKFORCE_ROUTE_MODEL = "embedded/lexical"
    assert setup_from_settings() == {
        "delegate_flows": ("agent",),
        "route_model": "embedded/lexical",
        "round_deadline_ms": 300_000,
    }


def test_the_example_tree_has_a_coordinator_over_the_support_workers(settings, db):
    workers, errors = read_workforce(settings.WORKFORCE_ROOT)
    assert errors == []
    help_ = next(w for w in workers if w.id == HELP)
    assert help_.flow == "coordinator" and help_.config["delegates"] == list(DELEGATES)
    assert [w for w, _ in hire_problems(workers) if w == HELP] == []


def test_a_coordinator_file_without_delegates_is_hired_with_none(make_tree, db):
    files = desk_tree()
    files["teams/support/workers/help/WORKER.md"] = coordinator_md(None)
    workers, _ = read_workforce(make_tree(files))
    assert problems(make_tree) == [] and hire_workforce(workers)


def test_manage_py_check_names_a_coordinator_it_cant_hire(make_tree, settings, db):
    from seats.checks import check_workers

    settings.WORKFORCE_ROOT = str(make_tree(desk_tree(rounds=4, routing="smart")))
    messages = [e.msg for e in check_workers() if e.id == "seats.E002"]
    assert messages == [
        'teams/support/workers/help/WORKER.md: worker support.help: routing: "smart" is not a routing the coordinator '
        "knows; it is judgment, best-fit, round-robin or everyone",
        "teams/support/workers/help/WORKER.md: worker support.help: rounds: 4 is above 3; rounds can be at most 3",
    ]
