"""``manage.py check`` warns about a model id that cannot work: ``openai/*`` with no
endpoint and no key configured (the openai client would call api.openai.com, keyless)."""

from __future__ import annotations

from seats.checks import check_model_endpoints
from tests.conftest import write_tree
from tests.seats.conftest import worker_md

HINT = (
    "Set OPENAI_BASE_URL (e.g. http://127.0.0.1:11434/v1 for Ollama) and OPENAI_API_KEY, "
    "or use an embedded model (embedded/echo, embedded/lexical)."
)


def sentence(where: str, model: str) -> str:
    return (
        f"{where}: {model} cannot work: neither OPENAI_BASE_URL nor OPENAI_API_KEY is set, so its calls would "
        "go to api.openai.com with no key and fail."
    )


def test_openai_models_with_no_endpoint_and_no_key_warn_once_per_use(settings, tmp_path):
    settings.WORKFORCE_ROOT = str(
        write_tree(
            tmp_path,
            {
                "teams/eng/workers/lead/WORKER.md": worker_md("Leads.", model="openai/gpt-4o-mini"),
                "teams/eng/workers/analyst/WORKER.md": worker_md("Analyses.", model="embedded/echo"),
            },
        )
    )
    settings.OPENAI_BASE_URL = settings.OPENAI_API_KEY = ""
    settings.WORKFORCE_MODEL = "embedded/echo"
    settings.WORKFORCE_ROUTE_MODEL = "openai/router"
    settings.WORKFORCE_COORDINATOR_ROUTE_MODEL = "openai/router"
    found = check_model_endpoints()
    assert [(w.id, w.msg, w.hint) for w in found] == [
        ("seats.W001", sentence("WORKFORCE_ROUTE_MODEL", "openai/router"), HINT),
        ("seats.W001", sentence("WORKFORCE_COORDINATOR_ROUTE_MODEL", "openai/router"), HINT),
        ("seats.W001", sentence("worker eng.lead (model:)", "openai/gpt-4o-mini"), HINT),
    ]
    assert all(w.level == 30 for w in found)  # warnings: nothing is refused


def test_an_endpoint_or_a_key_is_enough(settings, tmp_path):
    settings.WORKFORCE_ROOT = str(
        write_tree(tmp_path, {"teams/eng/workers/lead/WORKER.md": worker_md("Leads.", model="openai/x")})
    )
    settings.WORKFORCE_MODEL = "openai/x"
    settings.OPENAI_BASE_URL, settings.OPENAI_API_KEY = "http://127.0.0.1:11434/v1", ""
    assert check_model_endpoints() == []
    settings.OPENAI_BASE_URL, settings.OPENAI_API_KEY = "", "sk-test"
    assert check_model_endpoints() == []


BOARD = "customer-escalations-awaiting-engineering-review"
MAILBOX = "support.escalations"


def test_a_seat_offered_a_tool_name_openai_refuses_is_named(settings, tmp_path):
    from tests.conftest import mailbox_md
    from workforce.llm.openai_provider import tool_alias

    settings.WORKFORCE_ROOT = str(
        write_tree(
            tmp_path,
            {
                "teams/support/mailboxes/escalations/MAILBOX.md": mailbox_md(
                    members=("support.lead", "support.quiet"), boards=f"[{BOARD}]"
                ),
                "teams/support/workers/lead/WORKER.md": worker_md(
                    "Leads.", model="openai/gpt-4o-mini", drains=f"[{MAILBOX}.{BOARD}]"
                ),
                "teams/support/workers/echo/WORKER.md": worker_md(
                    "Echoes.", model="embedded/echo", drains=f"[{MAILBOX}.{BOARD}]"
                ),
                "teams/support/workers/quiet/WORKER.md": worker_md("Short ids only.", model="openai/gpt-4o-mini"),
            },
        )
    )
    settings.WORKFORCE_MODEL = "embedded/echo"
    from seats.checks import check_tool_names

    [warning] = check_tool_names()  # not the embedded seat (no limit), not the one with short names
    assert warning.id == "seats.W002" and warning.level == 30
    suffix = "_support_escalations_customer_escalations_awaiting_engineering_review"
    tools = ("addTask", "assignTask", "updateTask", "listTasks", "completeTask", "failTask", "blockTask", "cancelTask")
    names = "; ".join(f"{t}{suffix} ({len(t + suffix)} characters) is sent as {tool_alias(t + suffix)}" for t in tools)
    assert warning.msg == (
        "teams/support/workers/lead/WORKER.md: seat support.lead (openai/gpt-4o-mini) is offered tools OpenAI refuses by "
        f"name (more than 64 characters, or not [a-zA-Z0-9_-]): {names}."
    )
    assert all(len(t + suffix) > 64 for t in tools)
