"""docs/architecture.md matches where the ``do_*`` functions live: its table lists every
module that defines one, with exactly those functions, and every ``do_*`` the page names
(as ``app.module.do_x`` or bare) exists there."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
APPS = ("workforce", "boards", "seats", "mailboxes", "coordinators", "mail", "web")


def _do_functions_in_code() -> dict[str, list[str]]:
    """``{"mailboxes/routing.py": ["do_route_post", ...]}``: top-level ``do_*`` in source order."""
    found: dict[str, list[str]] = {}
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            names = [
                node.name
                for node in ast.parse(path.read_text()).body
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("do_")
            ]
            if names:
                found[str(path.relative_to(ROOT))] = names
    return found


def _do_table_in_doc() -> dict[str, list[str]]:
    rows: dict[str, list[str]] = {}
    for line in DOC.read_text().splitlines():
        match = re.fullmatch(r"\| `([\w/]+\.py)` \| (`do_\w+`(?:, `do_\w+`)*) \|", line)
        if match:
            rows[match.group(1)] = re.findall(r"`(do_\w+)`", match.group(2))
    return rows


def test_the_table_lists_every_do_function_where_it_lives():
    code = _do_functions_in_code()
    doc = _do_table_in_doc()
    assert {m: sorted(f) for m, f in doc.items()} == {m: sorted(f) for m, f in code.items()}


def test_every_do_function_the_page_names_exists_where_it_says():
    code = _do_functions_in_code()
    defined = {name for names in code.values() for name in names}
    by_module = {path.removesuffix(".py").replace("/", "."): names for path, names in code.items()}
    text = DOC.read_text()
    wrong = []
    for dotted in sorted(set(re.findall(r"`((?:[a-z_]+\.)+)(do_\w+)", text))):
        module, name = dotted[0].rstrip("."), dotted[1]
        if name not in by_module.get(module, []):
            wrong.append(f"{module}.{name}")
    bare = set(re.findall(r"\bdo_[a-z_]+[a-z]\b", text)) - {"do_verb_noun"}
    assert wrong == []
    assert sorted(bare - defined) == []
