"""``{% field form "goal" "Goal" %}``: one labelled input of a page form with what the
person typed and, beside it, the refusal about it (``web.forms``)."""

from __future__ import annotations

from django import template

from web.queries import row_ops as _row_ops

register = template.Library()


@register.inclusion_tag("web/forms/_field.html")
def field(
    form,
    prefix: str,
    name: str,
    label: str,
    kind: str = "text",
    required: bool = False,
    placeholder: str = "",
    rows: int = 3,
    default: str = "",
):
    """Render field ``name`` of ``form`` (a ``FormState``, or "" before any POST); the
    element ids start with ``prefix`` (unique on the page); ``default`` is the value
    before anything was typed.

    ``kind`` is ``text`` or ``textarea``."""
    state = form.f.get(name) if form else None
    return {
        "form_name": prefix,
        "name": name,
        "label": label,
        "kind": kind,
        "required": required,
        "placeholder": placeholder,
        "rows": rows,
        "value": state.value if state else default,
        "error": state.error if state else "",
        "reason": state.reason if state else "",
        "problems": form.problems if form and state and state.error else [],
    }


@register.inclusion_tag("web/forms/_status.html")
def form_status(form):
    """The form-level refusal (about no one field) or the done note, beside the button."""
    return {"form": form or None, "error": form.form_error if form else "", "done": form.done if form else ""}


@register.filter
def words(status: str) -> str:
    """A status as words: ``in_progress`` -> ``In progress``."""
    text = str(status).replace("_", " ").replace("-", " ")
    return text[:1].upper() + text[1:]


@register.filter
def pick(forms, name: str):
    """``forms|pick:key``: the flashed form called ``name``, or "" (none)."""
    return forms.get(name, "") if isinstance(forms, dict) else ""


@register.filter
def row_ops(status: str) -> list:
    """``task.status|row_ops``: the ``(op, RowOp)`` row actions a card in ``status``
    offers (``web.queries.row_ops``: the boards' transition table)."""
    return _row_ops(status)
