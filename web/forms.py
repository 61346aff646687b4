"""The pages' forms (docs/pages.md "The pages", "Forms"): what a person typed, the refusal
shown beside the field it is about, and the one response shape every form action has.

Every form works without JavaScript: a plain POST answers a redirect back to its page
(post/redirect/get), the form's state (values, the refusal, a done note) carried in the
browser session for that one page load (``web.context.workforce`` hands it to the
page as ``forms.<name>``). With htmx (``HX-Request``) the same POST answers the form's
own fragment, re-rendered in place with the same state (status 200: htmx swaps no 4xx).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from django.http import HttpResponse
from django.shortcuts import redirect, render

from web.htmx import HtmxHttpRequest
from workforce.refusals import Refusal

FLASH = "workforce_forms"
FORM_LEVEL = ""  # a refusal that is about no one field: shown beside the submit button


@dataclass
class FieldState:
    """One field as the page shows it: what was typed and the refusal beside it."""

    value: str = ""
    error: str = ""
    reason: str = ""


@dataclass
class FormState:
    """One form's state: ``values`` as typed, ``error``/``reason`` and the field
    (``field``, ``FORM_LEVEL`` for none) a refusal is about, ``done`` once it worked."""

    name: str
    values: dict[str, str] = dataclasses.field(default_factory=dict)
    field: str | None = None
    error: str = ""
    reason: str = ""
    problems: list[str] = dataclasses.field(default_factory=list)
    done: str = ""

    @property
    def f(self) -> dict[str, FieldState]:
        """``{field: FieldState}`` for the template (``form.f.goal.error``)."""
        shown = {name: FieldState(value=value) for name, value in self.values.items()}
        if self.field is not None:
            state = shown.setdefault(self.field, FieldState())
            state.error, state.reason = self.error, self.reason
        return shown

    @property
    def form_error(self) -> str:
        return self.error if self.field == FORM_LEVEL else ""

    def as_flash(self) -> dict:
        return {
            "values": self.values,
            "field": self.field,
            "error": self.error,
            "reason": self.reason,
            "problems": self.problems,
            "done": self.done,
        }


def refusal_field(refusal_reason: str, message: str, fields: tuple[str, ...], by_reason: dict[str, str]) -> str:
    """The field a refusal is about: ``by_reason[reason]``, else the field an
    ``invalid-input`` message starts with (``goal: This field may not be blank.``),
    else ``FORM_LEVEL``."""
    if refusal_reason in by_reason:
        return by_reason[refusal_reason]
    detail = message.split(": ", 1)[1] if message.startswith(f"{refusal_reason}: ") else message
    for name in fields:
        if detail.startswith((f"{name}:", f"{name} ", f"{name}.")):
            return name
    return FORM_LEVEL


def refused(form: FormState, refusal_reason: str, message: str, fields: tuple[str, ...], by_reason=None, problems=None):
    """``form`` with the refusal ``(reason, message)`` placed beside its field."""
    form.reason, form.error = refusal_reason, message
    form.field = refusal_field(refusal_reason, message, fields, by_reason or {})
    form.problems = list(problems or [])
    return form


def typed(request: HtmxHttpRequest, name: str, fields: tuple[str, ...]) -> FormState:
    """The form ``name`` as the person typed it (each of ``fields`` from the POST)."""
    return FormState(name=name, values={key: request.POST.get(key, "") for key in fields})


def from_refusal(form: FormState, refusal: Refusal, fields: tuple[str, ...], by_reason=None) -> FormState:
    """``form`` refused by ``refusal`` (a ``WorkerRefused``'s problems listed).

    The page lists the problems under the message, so the message loses its run-on copy
    of them (``…: 2 problems: a; b. Nothing was written.`` reads ``…: 2 problems.
    Nothing was written.``): each problem is shown once."""
    problems = list(getattr(refusal, "problems", None) or [])
    message = refusal.message
    listed = ": " + "; ".join(problems)
    if problems and listed in message:
        message = message.replace(listed, "", 1)
    return refused(form, refusal.reason, message, fields, by_reason, problems)


def respond(
    request: HtmxHttpRequest, form: FormState, *, page_url: str, fragment: str, context: dict | None = None, go: str | None = None
) -> HttpResponse:
    """The answer to a form POST.

    With htmx: ``fragment`` (the form's template) rendered with ``form`` and ``context``
    (status 200), or, when ``go`` names a page to go to after success, an
    ``HX-Redirect`` there. Without: a redirect to ``go`` (success) or ``page_url``, the
    form's state flashed for that page.
    """
    if request.htmx:
        if go and not form.error:
            response = HttpResponse(status=204)
            response["HX-Redirect"] = go
            return response
        return render(request, fragment, {**(context or {}), "form": form})
    target = go if go and not form.error else page_url
    flashed = request.session.get(FLASH) or {}
    flashed = flashed if flashed.get("path") == target else {"path": target, "forms": {}}
    flashed["forms"][form.name] = form.as_flash()
    request.session[FLASH] = flashed
    return redirect(target)


def take_flashed(request: HtmxHttpRequest) -> dict[str, FormState]:
    """The forms flashed for the page ``request`` renders (once: they are removed)."""
    session = getattr(request, "session", None)
    if session is None or FLASH not in session:
        return {}
    flashed = session.get(FLASH) or {}
    if flashed.get("path") != request.path:
        return {}
    del session[FLASH]
    return {name: FormState(name=name, **state) for name, state in flashed.get("forms", {}).items()}
