"""The layers contract (docs/architecture.md "Layers"): import-linter's configuration in
pyproject.toml covers every installed app, and it fails a wrong import."""

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from django.apps import apps

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
COMPOSITION_ROOT = "workforce_project"


def importlinter_config() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]


def contract(config: dict, contract_id: str) -> dict:
    return next(c for c in config["contracts"] if c["id"] == contract_id)


def layer_names(layer: str) -> list[str]:
    return [name.strip().strip("()") for name in layer.split("|")]


def local_apps() -> set[str]:
    """The installed apps that live in this repository (top-level packages)."""
    return {config.name for config in apps.get_app_configs() if "." not in config.name and Path(config.path).parent == ROOT}


def test_every_installed_app_is_a_root_package():
    assert set(importlinter_config()["root_packages"]) == local_apps()


def test_every_app_but_the_composition_root_is_a_layer():
    layers = contract(importlinter_config(), "layers")["layers"]
    listed = [name for layer in layers for name in layer_names(layer)]
    assert listed == ["coordinators", "mail", "web", "mailboxes", "seats", "boards", "workforce"]
    assert local_apps() - {COMPOSITION_ROOT} <= set(listed)
    assert COMPOSITION_ROOT not in listed


def test_the_top_apps_that_exist_are_in_the_independence_contract():
    config = importlinter_config()
    top = layer_names(contract(config, "layers")["layers"][0])
    existing = [name for name in top if name in config["root_packages"]]
    assert sorted(contract(config, "top-apps-independent")["modules"]) == sorted(existing)


# ----------------------------------------------------------------- the contract at work


def stub_tree(tmp_path: Path, imports: dict[str, str], extra_apps: tuple[str, ...] = ()) -> Path:
    """A tree of empty packages named like the apps, with pyproject.toml's contracts;
    ``imports`` maps a module (``boards.x``) to the module it imports."""
    config = importlinter_config()
    config["root_packages"] = list(dict.fromkeys([*config["root_packages"], *extra_apps]))
    if extra_apps:
        modules = contract(config, "top-apps-independent")["modules"]
        contract(config, "top-apps-independent")["modules"] = list(dict.fromkeys([*modules, *extra_apps]))
    for package in config["root_packages"]:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    # The model package, with the modules its contract names (each empty unless ``imports`` says).
    llm = contract(config, "llm-layers")
    (tmp_path / "workforce" / "llm").mkdir()
    (tmp_path / "workforce" / "llm" / "__init__.py").write_text("")
    for name in (n for layer in llm["layers"] for n in layer_names(layer)):
        (tmp_path / "workforce" / "llm" / f"{name}.py").write_text("")
    for module, imported in imports.items():
        path = tmp_path.joinpath(*module.split("."))
        if path.is_dir():
            path = path / "__init__"
        path.with_suffix(".py").write_text(f"import {imported}\n")
    (tmp_path / ".importlinter").write_text(_as_ini(config))
    return tmp_path


def _as_ini(config: dict) -> str:
    lines = ["[importlinter]", "root_packages =", *(f"    {p}" for p in config["root_packages"])]
    for c in config["contracts"]:
        lines += ["", f"[importlinter:contract:{c['id']}]", f"name = {c['name']}", f"type = {c['type']}"]
        key = {"layers": "layers", "independence": "modules", "acyclic_siblings": "ancestors"}[c["type"]]
        lines += [f"{key} =", *(f"    {m}" for m in c[key])]
        if "containers" in c:
            lines += ["containers =", *(f"    {m}" for m in c["containers"])]
    return "\n".join(lines) + "\n"


def lint(tree: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(tree / ".importlinter"), "--no-cache"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="import-linter is not installed (the test extra)")
def test_imports_down_the_layers_are_kept(tmp_path):
    tree = stub_tree(
        tmp_path,
        {
            "coordinators.a": "mailboxes",
            "mailboxes.a": "seats",
            "seats.a": "boards",
            "boards.a": "workforce",
            "workforce_project.a": "coordinators",
        },
    )
    result = lint(tree)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 4 kept, 0 broken." in result.stdout


@pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="import-linter is not installed (the test extra)")
@pytest.mark.parametrize(
    "importer, imported",
    [
        ("workforce.a", "boards"),
        ("boards.a", "seats"),
        ("seats.a", "mailboxes"),
        ("mailboxes.a", "coordinators"),
    ],
)
def test_an_import_up_the_layers_is_broken(tmp_path, importer, imported):
    result = lint(stub_tree(tmp_path, {importer: imported}))
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"{importer.partition('.')[0]} is not allowed to import {imported}" in result.stdout
    assert "Contracts: 3 kept, 1 broken." in result.stdout


@pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="import-linter is not installed (the test extra)")
def test_a_top_app_importing_another_is_broken_once_it_exists(tmp_path):
    result = lint(stub_tree(tmp_path, {"mail.a": "coordinators", "mail.b": "mailboxes"}, extra_apps=("mail",)))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "mail is not allowed to import coordinators" in result.stdout
    assert "Contracts: 2 kept, 2 broken." in result.stdout


@pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="import-linter is not installed (the test extra)")
def test_the_model_package_kept_in_its_layers(tmp_path):
    tree = stub_tree(
        tmp_path,
        {
            "workforce.llm": "workforce.llm.resolver",
            "workforce.llm.resolver": "workforce.llm.openai_provider",
            "workforce.llm.openai_provider": "workforce.llm.evaluation",
            "workforce.llm.evaluation": "workforce.llm.base",
        },
    )
    result = lint(tree)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 4 kept, 0 broken." in result.stdout


@pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="import-linter is not installed (the test extra)")
def test_a_module_importing_its_own_package_closes_a_cycle_and_is_broken(tmp_path):
    """The cycle the model package once hid: evaluation imported ``workforce.llm`` inside a
    function, and the package's ``__init__`` imports the provider that imports evaluation.
    Sibling acyclicity does not see it (the parent is not a sibling); the layers do."""
    tree = stub_tree(
        tmp_path,
        {
            "workforce.llm": "workforce.llm.openai_provider",
            "workforce.llm.openai_provider": "workforce.llm.evaluation",
            "workforce.llm.evaluation": "workforce.llm",
        },
    )
    (tree / "workforce" / "llm" / "evaluation.py").write_text("def resolve():\n    from workforce import llm\n")
    result = lint(tree)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "workforce.llm.evaluation is not allowed to import workforce.llm.openai_provider" in result.stdout
    assert "No cycles between the modules of one app KEPT" in result.stdout
    assert "Contracts: 3 kept, 1 broken." in result.stdout


def test_no_app_imports_another_packages_private_names():
    """Apps use each other's public names only (the worker reader once imported the tree
    reader's private helpers)."""
    import ast

    found = []
    for package in importlinter_config()["root_packages"]:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text())
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    if node.module.split(".")[0] == package:
                        continue
                    found += [
                        f"{path.relative_to(ROOT)}: {node.module}.{a.name}"
                        for a in node.names
                        if a.name.startswith("_") and not a.name.startswith("__")
                    ]
    assert found == []
