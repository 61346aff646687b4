"""``manage.py check`` validates the workforce tree, so a bad tree stops the server at
start-up with every problem named at once (spec "Treat a non-empty errors as fatal")."""
from __future__ import annotations

from django.conf import settings
from django.core import checks

from workforce.tree import WorkforceRootError

from .roster import TreeError, load_roster


@checks.register("workforce")
def check_workforce_tree(app_configs=None, **kwargs):
    root = settings.WORKFORCE_ROOT
    try:
        load_roster(root)
    except WorkforceRootError as exc:
        return [checks.Error(f"WORKFORCE_ROOT {root} cannot be read: {exc}", id="workforce.E001")]
    except TreeError as exc:
        return [checks.Error(str(exc), hint="Fix the files named above; nothing was opened.", id="workforce.E002")]
    return []


@checks.register("workforce")
def check_route_model(app_configs=None, **kwargs):
    """``WORKFORCE_ROUTE_MODEL`` must be a model id an evaluation model can be made of
    (``embedded/lexical``, ``openai/<name>``, ...), or empty (no route)."""
    from workforce.llm import evaluation_model_problem

    model = settings.WORKFORCE_ROUTE_MODEL
    problem = evaluation_model_problem(model) if model else None
    if problem:
        return [checks.Error(f"WORKFORCE_ROUTE_MODEL: {problem}", id="workforce.E003")]
    return []
