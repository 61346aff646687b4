"""Who wrote a line, on the pages (docs/architecture.md "Who said what"): ``{% writer
posted_by fallback %}`` names the writer, ``{% posted_by posted_by author %}`` says how
the server knows it and shows an ``author`` label that differs from it."""

from __future__ import annotations

from django import template

from workforce.posted_by import PostedBy, as_posted_by

register = template.Library()


@register.simple_tag
def writer(posted_by: object, fallback: object = "") -> str:
    """The line's writer: its ``postedBy`` id (a stored dict, or None for a line written
    before it was recorded, when ``fallback``, the spec's author or principal, names it)."""
    known = as_posted_by(posted_by)
    return known["id"] if known is not None else str(fallback or "")


@register.inclusion_tag("web/_posted_by.html")
def posted_by(posted_by: object, author: object = None) -> dict:
    """``{pb, author}`` for ``web/_posted_by.html``: ``pb`` the line's ``PostedBy`` (None:
    nothing is shown), ``author`` the unverified label when it names someone other than
    the writer (shown as such), else None."""
    known: PostedBy | None = as_posted_by(posted_by)
    label = author if isinstance(author, str) and author and known is not None and author != known["id"] else None
    return {"pb": known, "author": label}
