"""Tools refuse in one shape (docs/architecture.md "How a tool says no"):
``{"refused": "<code>: <sentence>"}``, built by ``workforce.tools.refuse`` alone."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from boards.errors import TASK_NOT_FOUND, TaskError
from workforce.refusals import Refusal
from workforce.tools import refusal_code, refuse, refused

ROOT = Path(__file__).resolve().parents[2]
APPS = ("workforce", "boards", "seats", "mailboxes", "coordinators", "mail", "web")


def test_refuse_keeps_the_code_exactly_as_the_first_word():
    assert refuse("invalid-input", "list-mailboxes takes no input.") == {
        "refused": "invalid-input: list-mailboxes takes no input."
    }
    assert refuse(TASK_NOT_FOUND, "No task 'x'.") == {"refused": "task_not_found: No task 'x'."}


def test_a_refusal_and_a_task_error_answer_the_same_shape():
    assert refused(Refusal("delegate-not-listed", '"a" isn\'t a delegate.')) == {
        "refused": 'delegate-not-listed: "a" isn\'t a delegate.'
    }
    assert TaskError(TASK_NOT_FOUND, "No task 'x'.").as_result() == {"refused": "task_not_found: No task 'x'."}


def test_refusal_code_reads_the_code_back():
    assert refusal_code({"refused": "task_terminal: t1 is cancelled: no call changes it."}) == "task_terminal"
    assert refusal_code({"ok": True, "taskId": "t1"}) is None
    assert refusal_code({"refused": 3}) is None


def _refusal_literals() -> list[str]:
    """Where app code writes a dict literal with ``"refused"`` or ``"ok": False``."""
    found = []
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if not isinstance(node, ast.Dict):
                    continue
                for key, value in zip(node.keys, node.values, strict=True):
                    if not isinstance(key, ast.Constant):
                        continue
                    ok_false = key.value == "ok" and isinstance(value, ast.Constant) and value.value is False
                    if key.value == "refused" or ok_false:
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_only_the_helper_builds_a_refusal():
    # The one literal is the one in refuse (its line found, so an edit above it moves it).
    lines, first = inspect.getsourcelines(refuse)
    helper = first + next(i for i, line in enumerate(lines) if line.lstrip().startswith('return {"refused":'))
    assert _refusal_literals() == [f"workforce/tools.py:{helper}"]
