"""The package's shape, read from its source: layers depend downward only, and the hot path stays plain.

Layers, lowest first: lang < engine < durable, providers, render, executors, telemetry < checkpoints < app < testing <
notebook, cli.
A module may import its own package and any lower layer; never a peer, never a higher one.
These tests parse every module with ``ast`` (imports inside functions count too).
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "mkl_notebook"
LAYERS = {
    "_version": 0,
    "errors": 0,  # the one base of every error the package raises
    "lang": 1,
    "stdlib": 1,  # package data: the standard library's machine files (read by lang.stdlib)
    "engine": 2,
    "durable": 3,
    "providers": 3,
    "render": 3,
    "executors": 3,
    "telemetry": 3,  # traces of runs, exported over OTLP (its SDK imported only when export is on)
    "checkpoints": 4,
    "app": 5,
    "testing": 6,
    "notebook": 7,
    "cli": 7,
    "server": 7,
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


# The front ends parse input and render output: every use case is the application layer's.
FRONT_ENDS = ("cli", "notebook", "server")
FRONT_END_MAY_IMPORT = ("app", "render")
FRONT_END_EXCEPTIONS: dict[str, str] = {}  # "module -> imported module": why the front end may reach past app
# Modules that only re-export names under their old paths (kept for one release), and the package's root: a
# facade whose short public names (``mkl_notebook.run``, ``load``, ``map``) name the workspace's use cases.
FACADES = ("mkl_notebook", "mkl_notebook.testing", "mkl_notebook.render.views")
# Old paths of modules that moved up or aside, each naming the moved module itself; empty since the shims of
# issue 32 went (issue 49): a module that moves is imported from its new home everywhere, with no shim left.
MOVED: dict[str, str] = {}
MAX_LINES = 600  # lines a reader holds in mind at once (docs/architecture.md)


def front_end_reaches(module: str, imports: Iterator[tuple[str, int]]) -> list[str]:
    """The imports of a front-end ``module`` that reach past the application and render layers."""
    own = layer_of(module)
    if own not in FRONT_ENDS:
        return []
    found = []
    for target, line in imports:
        other = layer_of(target)
        if other is None or other == own or other in FRONT_END_MAY_IMPORT:
            continue
        if f"{module} -> {target}" not in FRONT_END_EXCEPTIONS:
            found.append(f"{module}:{line}: {own} imports {target} ({other}); ask the application layer instead")
    return found


def test_front_ends_import_only_the_application_and_render_layers() -> None:
    found = [line for module, path in modules() for line in front_end_reaches(module, imports_of(module, path))]
    assert not found, "\n".join(found)


def test_the_front_end_rule_sees_a_reach_past_the_application_layer() -> None:
    source = (
        "from ..app.workspace import Workspace\n"
        "from ..render import views\n"
        "from . import common\n"
        "from ..durable.stores import SQLiteStore\n"
        "def later():\n"
        "    from ..lang.loader import load\n"
    )
    found = front_end_reaches("mkl_notebook.cli.probe", imported("mkl_notebook.cli.probe", source))
    assert found == [
        "mkl_notebook.cli.probe:4: cli imports mkl_notebook.durable.stores (durable); "
        "ask the application layer instead",
        "mkl_notebook.cli.probe:6: cli imports mkl_notebook.lang.loader (lang); ask the application layer instead",
    ]


JOURNAL_ATTRIBUTES = ("records", "latest")  # an outcome's journal: read through Run and Outcome's typed reads


def journal_reads(module: str, source: str) -> list[str]:
    """Where a front-end ``module`` reads a journal's records itself (``outcome.records``, ``outcome.latest``)."""
    if layer_of(module) not in FRONT_ENDS:
        return []
    return [
        f"{module}:{node.lineno}: reads .{node.attr}; ask the run (Run.answers_in, asked_at, journal_length, …)"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Attribute) and node.attr in JOURNAL_ATTRIBUTES
    ]


def test_front_ends_read_no_journal_records() -> None:
    found = [line for module, path in modules() for line in journal_reads(module, path.read_text(encoding="utf-8"))]
    assert not found, "\n".join(found)


def test_the_journal_rule_sees_a_front_end_reading_records() -> None:
    source = "def shown(run):\n    return len(run.outcome.records), run.outcome.latest, run.journal_length\n"
    assert sorted(
        line.split(": ")[1].split(";")[0] for line in journal_reads("mkl_notebook.notebook.probe", source)
    ) == [
        "reads .latest",
        "reads .records",
    ]
    assert journal_reads("mkl_notebook.app.probe", source) == []


def defined_names(module: str, source: str) -> Iterator[str]:
    """The public functions and classes ``module`` defines at its top level."""
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
            yield node.name


def test_no_public_name_is_defined_twice() -> None:
    where: dict[str, list[str]] = {}
    for module, path in modules():
        if module in FACADES:
            continue
        for name in defined_names(module, path.read_text(encoding="utf-8")):
            where.setdefault(name, []).append(module)
    twice = {name: modules for name, modules in where.items() if len(modules) > 1}
    assert not twice, twice


def test_no_module_is_over_the_size_a_reader_holds() -> None:
    sizes = {module: len(path.read_text(encoding="utf-8").splitlines()) for module, path in modules()}
    assert not {module: size for module, size in sizes.items() if size > MAX_LINES}


def test_every_module_belongs_to_a_known_layer() -> None:
    unknown = {layer_of(module) for module, _ in modules()} - {None, *LAYERS}
    assert not unknown, f"add these packages to the layer map: {unknown}"


def test_layers_depend_downward_only() -> None:
    violations = [
        line for module, path in modules() if module not in MOVED for line in upward(module, imports_of(module, path))
    ]
    assert not violations, "\n".join(violations)


def import_graph(found: Iterator[tuple[str, Path]]) -> dict[str, set[str]]:
    """Which modules of the package each module imports (a name imported from a module counts as that module;
    imports only type checkers read count too: they tie the modules as much for a reader)."""
    paths = dict(found)
    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        targets = set()
        for target, _ in imports_of(module, path):
            while target and target not in paths:
                target = target.rpartition(".")[0]
            if target and target != module:
                targets.add(target)
        graph[module] = targets
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other in a circle, each sorted (Tarjan's strongly connected
    components of more than one module)."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        order[module] = low[module] = len(order)
        stack.append(module)
        for target in sorted(graph.get(module, ())):
            if target not in order:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], order[target])
        if low[module] == order[module]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for module in sorted(graph):
        if module not in order:
            visit(module)
    return cycles


def test_no_modules_import_each_other_in_a_circle() -> None:
    """A circle of imports (even one only type checkers read) is a knot a reader cannot start from: none."""
    assert import_cycles(import_graph(modules())) == []


def test_the_circle_check_sees_a_circle_through_a_type_checking_import() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert import_cycles(graph) == [["a", "b", "c"]]


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


MEMO_DECORATORS = ("functools.lru_cache", "functools.cache")


def _qualified(node: ast.expr, aliases: dict[str, str]) -> str | None:
    """The dotted name an expression names (``memo``, ``ft.cache``, ``memo(maxsize=4)``), its first part
    resolved through the module's imports; None when it names nothing."""
    if isinstance(node, ast.Call):
        return _qualified(node.func, aliases)
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.insert(0, node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([aliases.get(node.id, node.id), *parts])


def plain_problems(name: str, source: str, imports: Iterator[tuple[str, int]]) -> list[str]:
    """What keeps a module from being plain: private CPython APIs, manual lock juggling, memo decorators
    (under any name an import gives them)."""
    tree = ast.parse(source)
    problems = []
    for target, line in imports:
        private = any(part.startswith("_") for part in target.split(".")) and target != "__future__"
        if target.startswith("json.encoder") or (private and not target.startswith("mkl_notebook.")):
            problems.append(f"{name}:{line}: imports {target} (a private API)")
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            aliases.update({alias.asname or alias.name: alias.name for alias in node.names})
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            aliases.update({alias.asname or alias.name: f"{node.module}.{alias.name}" for alias in node.names})
    for call in _calls(tree):
        if isinstance(call.func, ast.Attribute) and call.func.attr in ("acquire", "release"):
            problems.append(f"{name}:{call.lineno}: .{call.func.attr}() (use `with lock:`)")
    for node in ast.walk(tree):
        for decorator in getattr(node, "decorator_list", []):
            if _qualified(decorator, aliases) in MEMO_DECORATORS:
                shown = ast.unparse(decorator)
                problems.append(f"{name}:{decorator.lineno}: @{shown} (per-run state lives in the run)")
    return problems


def test_the_code_stays_plain() -> None:
    """No private CPython APIs, no manual lock juggling, no memo decorators."""
    problems = [
        problem
        for module, path in modules()
        for problem in plain_problems(path.name, path.read_text(encoding="utf-8"), imports_of(module, path))
    ]
    assert not problems, "\n".join(problems)


def test_the_plain_rule_sees_a_memo_decorator_under_another_name() -> None:
    source = (
        "import functools as ft\n"
        "from functools import lru_cache as memo\n"
        "from json.encoder import encode_basestring\n"
        "@memo(maxsize=4)\n"
        "def a(): pass\n"
        "@ft.cache\n"
        "def b(): pass\n"
        "@cache\n"
        "def c(lock): lock.acquire()\n"
    )
    found = plain_problems("probe.py", source, imported("mkl_notebook.durable.probe", source))
    assert found == [
        "probe.py:3: imports json.encoder (a private API)",
        "probe.py:9: .acquire() (use `with lock:`)",
        "probe.py:4: @memo(maxsize=4) (per-run state lives in the run)",
        "probe.py:6: @ft.cache (per-run state lives in the run)",
    ]


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


def test_every_error_the_package_raises_has_one_base() -> None:
    """Front ends catch :class:`UserError` (a person's mistake) and every error is an :class:`MklError`."""
    from mkl_notebook.errors import MklError

    orphans = []
    for module, _ in modules():
        if module.endswith(".__main__"):
            continue  # running it is what importing it does
        loaded = importlib.import_module(module)
        orphans += [
            f"{module}.{name}"
            for name, value in vars(loaded).items()
            if isinstance(value, type) and issubclass(value, BaseException) and value.__module__ == module
            if not issubclass(value, MklError)
        ]
    assert not orphans, orphans


# What `mkl --help` and a usage error load is held in tests/test_startup_imports.py.


def test_the_library_flag_names_the_variable_the_library_is_read_from() -> None:
    """The parser's help spells the variable out (reading the library's module would load the loader)."""
    from mkl_notebook.cli import build_parser
    from mkl_notebook.lang.stdlib import LIBRARY_PATH_ENV

    commands = next(action for action in build_parser()._actions if action.dest == "command")
    library = next(action for action in commands.choices["run"]._actions if action.dest == "library")
    assert f"${LIBRARY_PATH_ENV})" in str(library.help)


MAX_PARAMETERS = 8  # of a public function or method of the application layer: more, and it wants a request object


def wide_functions(module: str, source: str) -> Iterator[str]:
    """The public functions and methods of ``module`` taking more than ``MAX_PARAMETERS`` (``self`` aside)."""
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.name.startswith("_"):
            continue
        given = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
        if given and given[0].arg in ("self", "cls"):
            given = given[1:]
        if len(given) > MAX_PARAMETERS:
            yield f"{module}.{node.name}: {len(given)} parameters"


def test_no_use_case_takes_more_than_eight_parameters() -> None:
    wide = [
        line
        for module, path in modules()
        if layer_of(module) == "app"
        for line in wide_functions(module, path.read_text(encoding="utf-8"))
    ]
    assert not wide, "\n".join(wide)


def test_the_parameter_rule_sees_a_wide_method() -> None:
    source = (
        "class W:\n"
        "    def start(self, a, b, c, d, e, f, g, h, *, i=None):\n        pass\n"
        "    def _x(self, a, b, c, d, e, f, g, h, i): ...\n"
    )
    assert list(wide_functions("mkl_notebook.app.probe", source)) == ["mkl_notebook.app.probe.start: 9 parameters"]
