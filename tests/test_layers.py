"""The package's shape, read from its source: layers depend downward only, and the hot path stays plain.

Layers, lowest first: lang < engine < durable, providers, render < app < testing < notebook, cli.
A module may import its own package and any lower layer; never a peer, never a higher one.
These tests parse every module with ``ast`` (imports inside functions count too).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "mkl_notebook"
LAYERS = {
    "_version": 0,
    "lang": 0,
    "stdlib": 0,  # package data: the standard library's machine files (read by lang.stdlib)
    "engine": 1,
    "durable": 2,
    "providers": 2,
    "render": 2,
    "app": 3,
    "testing": 4,
    "notebook": 5,
    "cli": 5,
}
JUPYTER = ("IPython", "ipywidgets", "ipykernel", "traitlets", "jupyter_client", "nbformat", "nbclient")


def modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        yield ".".join(("mkl_notebook", *parts)).removesuffix(".__init__"), path


def imported(module: str, source: str, *, is_package: bool = False) -> Iterator[tuple[str, int]]:
    """Every module ``module`` imports, absolute, with the line (relative imports resolved)."""
    package = module if is_package else module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                target = ".".join([*parts[: len(parts) - node.level + 1], *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            yield target, node.lineno
            if node.level and not node.module:  # `from . import envelope`: the names are modules
                for alias in node.names:
                    yield f"{target}.{alias.name}", node.lineno


def imports_of(module: str, path: Path) -> Iterator[tuple[str, int]]:
    return imported(module, path.read_text(encoding="utf-8"), is_package=path.name == "__init__.py")


def layer_of(module: str) -> str | None:
    """The layer a package module belongs to (its first component under mkl_notebook), None for the root."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "mkl_notebook" else None


def upward(module: str, imports: Iterator[tuple[str, int]]) -> list[str]:
    """The imports of ``module`` that reach a peer or a higher layer."""
    own = layer_of(module)
    if own is None:
        return []  # the package root is the public facade: it loads the layers lazily
    found = []
    for target, line in imports:
        other = layer_of(target)
        if other is not None and other != own and LAYERS[other] >= LAYERS[own]:
            found.append(f"{module}:{line}: {own} imports {target} ({other})")
    return found


def test_every_module_belongs_to_a_known_layer() -> None:
    unknown = {layer_of(module) for module, _ in modules()} - {None, *LAYERS}
    assert not unknown, f"add these packages to the layer map: {unknown}"


def test_layers_depend_downward_only() -> None:
    violations = [line for module, path in modules() for line in upward(module, imports_of(module, path))]
    assert not violations, "\n".join(violations)


def test_the_contract_sees_upward_and_sideways_imports() -> None:
    """The checker itself finds what it must (so its passing means something)."""
    source = (
        "from . import replay\n"
        "from ..engine.oracle import Oracle\n"
        "from ..providers.scripted import ScriptedOracle\n"
        "def later():\n"
        "    from ..notebook.session import Session\n"
    )
    found = upward("mkl_notebook.durable.probe", imported("mkl_notebook.durable.probe", source))
    assert found == [
        "mkl_notebook.durable.probe:3: durable imports mkl_notebook.providers.scripted (providers)",
        "mkl_notebook.durable.probe:5: durable imports mkl_notebook.notebook.session (notebook)",
    ]


@pytest.mark.parametrize("layer", sorted(name for name, level in LAYERS.items() if level <= 4))
def test_below_the_notebook_nothing_imports_jupyter(layer: str) -> None:
    found = [
        f"{path.name}:{line}: {target}"
        for module, path in modules()
        if layer_of(module) == layer
        for target, line in imports_of(module, path)
        if target.split(".")[0] in JUPYTER
    ]
    assert not found, found


def test_only_the_litellm_provider_imports_litellm() -> None:
    found = [
        module
        for module, path in modules()
        for target, _ in imports_of(module, path)
        if target.split(".")[0] == "litellm" and module != "mkl_notebook.providers.litellm_provider"
    ]
    assert not found, found


def _calls(tree: ast.AST) -> Iterator[ast.Call]:
    return (node for node in ast.walk(tree) if isinstance(node, ast.Call))


def test_the_code_stays_plain() -> None:
    """No private CPython APIs, no manual lock juggling, no memo decorators."""
    problems = []
    for module, path in modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for target, line in imports_of(module, path):
            private = any(part.startswith("_") for part in target.split(".")) and target != "__future__"
            if target.startswith("json.encoder") or (private and not target.startswith("mkl_notebook.")):
                problems.append(f"{path.name}:{line}: imports {target} (a private API)")
        for call in _calls(tree):
            if isinstance(call.func, ast.Attribute) and call.func.attr in ("acquire", "release"):
                problems.append(f"{path.name}:{call.lineno}: .{call.func.attr}() (use `with lock:`)")
        for node in ast.walk(tree):
            decorators = getattr(node, "decorator_list", [])
            for decorator in decorators:
                name = ast.unparse(decorator)
                if "lru_cache" in name or name in ("cache", "functools.cache"):
                    problems.append(f"{path.name}:{decorator.lineno}: @{name} (per-run state lives in the run)")
    assert not problems, "\n".join(problems)


def test_journal_records_are_built_in_one_module() -> None:
    """A dict literal with a ``"t"`` key is a journal record: only durable/records.py writes one."""
    found = []
    for module, path in modules():
        if module == "mkl_notebook.durable.records":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Dict) and any(
                isinstance(key, ast.Constant) and key.value == "t" for key in node.keys
            ):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert not found, found
