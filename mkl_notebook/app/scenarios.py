"""The scenario and conformance runner (docs/language.md §8), shared by ``mkl test``, ``%mkl test`` and pytest.

The runner deliberately does not validate or check machines: several
conformance cases are "invalid" documents on purpose.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from ..engine.options import DEFAULT_MAX_WORKERS, RunOptions
from ..engine.result import RunResult
from ..engine.runner import run_machine
from ..lang import files, stdlib
from ..lang.findings import MachineError
from ..lang.loader import load_file, machine_from_mapping
from ..lang.located import parse_plain
from ..lang.model import Machine
from ..lang.siblings import sibling_registry
from ..providers.frozen import FrozenOracle
from ..providers.scripted import ScriptedOracle, ScriptError, oracle_from_script
from .errors import UsageProblem

RUN_OPTION_KEYS = frozenset(
    {
        "cost_budget",
        "suspendable",
        "escalate_suspend",
        "on_untrusted_flow",
        "tool_effects",
        "trusted_keys",
        "max_workers",
        "hitl",
        "max_steps",
        "ask_human",
    }
)
EXPECT_KEYS = frozenset({"status", "error", "error_prefix", "result", "at", "ask", "reply_to", "context", "trace"})
SCENARIO_KEYS = frozenset(
    {"name", "description", "llm", "tools", "hooks", "replies", "frozen", "expect", "input", "context", "run"}
)
SCRIPTED_KEYS = ("llm", "tools", "hooks", "replies")
_ABSENT = object()


class ScenarioFileError(UsageProblem):
    """A case or scenario file that cannot be used at all (a usage error, exit 2)."""


@dataclass
class Scenario:
    """One runnable check: a machine, scripted oracles, host values, options and expectations."""

    name: str
    machine: Machine
    registry: Mapping[str, Machine]
    script: Mapping[str, Any]
    expect: Mapping[str, Any] | None
    input: Mapping[str, Any] = field(default_factory=dict)
    context: Mapping[str, Any] = field(default_factory=dict)
    run: Mapping[str, Any] = field(default_factory=dict)
    source: str = ""


@dataclass
class ScenarioResult:
    name: str
    passed: bool
    why: str = ""
    result: RunResult | None = None

    def line(self) -> str:
        return f"PASS {self.name}" if self.passed else f"FAIL {self.name}: {self.why}"


def _read_yaml(path: Path) -> Any:
    try:
        text = files.read_text(path, files.SCRIPT_LIMIT)
    except OSError as exc:
        raise ScenarioFileError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise ScenarioFileError(f"{path}: is not UTF-8 text") from None
    try:
        return parse_plain(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark else ""
        raise ScenarioFileError(f"{path}: {where}the YAML does not parse ({getattr(exc, 'problem', exc)})") from None
    except RecursionError:
        raise ScenarioFileError(f"{path}: nests too deeply to be read") from None


def scenario_options(run: Mapping[str, Any], where: str) -> RunOptions:
    """Translate a case's ``run:`` block into engine options."""
    if not isinstance(run, Mapping):
        raise ScenarioFileError(f"{where}: 'run' must be a mapping of options")
    unknown = set(run) - RUN_OPTION_KEYS
    if unknown:
        raise ScenarioFileError(
            f"{where}: unknown run option(s) {', '.join(sorted(map(str, unknown)))}; "
            f"known: {', '.join(sorted(RUN_OPTION_KEYS))}"
        )
    policy = run.get("on_untrusted_flow", "report")
    if policy not in ("report", "halt"):
        raise ScenarioFileError(f"{where}: on_untrusted_flow must be 'report' or 'halt', got {policy!r}")
    hitl = run.get("hitl", "all" if run.get("escalate_suspend") else "none")
    if hitl not in ("all", "asking", "none"):
        raise ScenarioFileError(f"{where}: hitl must be 'all', 'asking' or 'none', got {hitl!r}")
    return RunOptions(
        cost_budget=run.get("cost_budget"),
        max_steps=run.get("max_steps"),
        suspendable=bool(run.get("suspendable", False)),
        hitl=hitl,
        ask_human=bool(run.get("ask_human", False)),
        on_untrusted_flow=policy,
        tool_effects=MappingProxyType(dict(run.get("tool_effects") or {})),
        trusted_keys=frozenset(run.get("trusted_keys") or ()),
        max_workers=int(run.get("max_workers") or DEFAULT_MAX_WORKERS),
    )


def _machine(data: Any, where: str) -> Machine:
    if not isinstance(data, Mapping):
        raise ScenarioFileError(f"{where}: the machine must be a mapping")
    try:
        return machine_from_mapping(dict(data), strict=False, source_name=where)
    except MachineError as exc:
        raise ScenarioFileError(str(exc)) from None


def load_cases(paths: Iterable[str | Path]) -> list[Scenario]:
    """Conformance cases: each file holds one case with an inline machine."""
    scenarios = []
    for raw_path in paths:
        path = Path(raw_path)
        data = _read_yaml(path)
        if not isinstance(data, Mapping) or "machine" not in data:
            raise ScenarioFileError(f"{path}: a case needs 'case', 'machine' and 'expect' keys")
        name = str(data.get("case") or path.stem)
        machine = _machine(data["machine"], f"{path}: machine")
        registry = {}
        extra = data.get("registry") or {}
        if not isinstance(extra, Mapping):
            raise ScenarioFileError(f"{path}: 'registry' must map machine names to machines")
        for reg_name, reg_machine in extra.items():
            registry[str(reg_name)] = _machine(reg_machine, f"{path}: registry '{reg_name}'")
        registry[machine.name] = machine
        scenarios.append(
            Scenario(
                name=name,
                machine=machine,
                registry=registry,
                script={key: data.get(key) for key in ("llm", "tools", "hooks") if key in data},
                expect=data.get("expect"),
                input=data.get("input") or {},
                context=data.get("context") or {},
                run=data.get("run") or {},
                source=str(path),
            )
        )
    return scenarios


def load_scenarios(machine_path: str | Path, script_path: str | Path, library: tuple[Path, ...] = ()) -> list[Scenario]:
    """A scenario list (``*.test.yaml``) run against one ``.mkl`` file, its calls finding the ``.mkl`` files
    beside it, else the library (the ``library`` folders first), as ``mkl run`` finds them."""
    machine_path = Path(machine_path)
    try:
        machine = load_file(machine_path, strict=False)
    except MachineError as exc:
        raise ScenarioFileError(str(exc)) from None
    callees = stdlib.with_library(machine, sibling_registry(machine_path, machine), library)
    return scenarios_from_file(machine, Path(script_path), callees)


def scenarios_from_file(machine: Machine, script_path: Path, registry: Mapping[str, Machine]) -> list[Scenario]:
    """The scenarios of a ``*.test.yaml`` file, to run against ``machine`` with ``registry`` for its calls."""
    return scenarios_from_mapping(machine, _read_yaml(script_path), registry, str(script_path))


def scenarios_from_mapping(machine: Machine, data: Any, registry: Mapping[str, Machine], where: str) -> list[Scenario]:
    if not isinstance(data, Mapping) or not isinstance(data.get("scenarios"), list):
        raise ScenarioFileError(f"{where}: a scenario file needs a 'scenarios:' list")
    scenarios = []
    for number, item in enumerate(data["scenarios"], 1):
        if not isinstance(item, Mapping):
            raise ScenarioFileError(f"{where}: scenario {number} must be a mapping")
        name = str(item.get("name") or f"scenario-{number}")
        unknown = sorted(map(str, set(item) - SCENARIO_KEYS))
        if unknown:  # a misspelt key would otherwise be a scenario that silently tests less
            raise ScenarioFileError(
                f"{where}: scenario '{name}' has unknown key(s) {', '.join(unknown)}; "
                f"known: {', '.join(sorted(SCENARIO_KEYS))} (docs/language.md §8)"
            )
        beside = [key for key in SCRIPTED_KEYS if key in item]
        if "frozen" in item and beside:  # two sources of answers: which one a request took would be unclear
            raise ScenarioFileError(
                f"{where}: scenario '{name}' answers from 'frozen', so it takes no {', '.join(beside)}"
            )
        scenarios.append(
            Scenario(
                name=name,
                machine=machine,
                registry=registry,
                script={key: item.get(key) for key in (*SCRIPTED_KEYS, "frozen") if key in item},
                expect=item.get("expect"),
                input=item.get("input") or {},
                context=item.get("context") or {},
                run=item.get("run") or {},
                source=where,
            )
        )
    return scenarios


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def _mismatches(expect: Mapping[str, Any], result: RunResult) -> list[str]:
    problems = []
    if result.status != expect.get("status"):
        problems.append(
            f"status: expected {expect.get('status')!r}, got {result.status!r}"
            + (f" ({result.error})" if result.error else "")
        )
    if "error" in expect and result.error != expect["error"]:
        problems.append(f"error: expected {expect['error']!r}, got {result.error!r}")
    if "error_prefix" in expect and not str(result.error or "").startswith(str(expect["error_prefix"])):
        problems.append(f"error: expected to start with {expect['error_prefix']!r}, got {result.error!r}")
    for key in ("result", "at", "ask", "reply_to"):
        if key in expect and getattr(result, key) != expect[key]:
            problems.append(f"{key}: expected {_show(expect[key])}, got {_show(getattr(result, key))}")
    for key, wanted in (expect.get("context") or {}).items():
        got = result.context.get(key)
        if got != wanted:
            problems.append(f"context.{key}: expected {_show(wanted)}, got {_show(got)}")
    if "trace" in expect:
        skeleton = expect["trace"] or []
        if len(skeleton) != len(result.trace):
            states = [step.get("state") for step in result.trace]
            problems.append(f"trace: expected {len(skeleton)} steps, got {len(result.trace)} {states}")
        else:
            for number, (wanted, step) in enumerate(zip(skeleton, result.trace, strict=False), 1):
                for key, value in (wanted or {}).items():
                    if step.get(key) != value:
                        problems.append(
                            f"trace step {number} {key}: expected {_show(value)}, got {_show(step.get(key))}"
                        )
    return problems


def run_scenario(scenario: Scenario) -> ScenarioResult:
    """Run one scenario on deep copies of everything it holds, and compare with ``expect``."""
    if not isinstance(scenario.expect, Mapping) or "status" not in scenario.expect:
        return ScenarioResult(scenario.name, False, "no 'expect' with a 'status'")
    unknown = set(scenario.expect) - EXPECT_KEYS
    if unknown:
        return ScenarioResult(scenario.name, False, f"unknown expect key(s) {', '.join(sorted(map(str, unknown)))}")
    try:
        options = scenario_options(scenario.run, scenario.name)
        script = copy.deepcopy(dict(scenario.script))
        oracle: ScriptedOracle | FrozenOracle = (
            FrozenOracle(script["frozen"], where=scenario.name)
            if "frozen" in script
            else oracle_from_script(script, where=scenario.name)
        )
    except (ScenarioFileError, ScriptError) as exc:
        return ScenarioResult(scenario.name, False, str(exc))
    result = run_machine(
        scenario.machine,
        oracle,
        registry=scenario.registry,
        context=copy.deepcopy(dict(scenario.context)),
        input=copy.deepcopy(dict(scenario.input)),
        options=options,
    )
    if isinstance(oracle, FrozenOracle) and oracle.changed:  # what every later mismatch follows from
        why = f"the first request that differs from the frozen run: {oracle.changed[0]}"
        return ScenarioResult(scenario.name, False, why, result)
    problems = _mismatches(scenario.expect, result)
    return ScenarioResult(scenario.name, not problems, "; ".join(problems), result)


def run_all(scenarios: Iterable[Scenario]) -> list[ScenarioResult]:
    return [run_scenario(scenario) for scenario in scenarios]


def scenarios_summary(outcomes: list[ScenarioResult]) -> str:
    passed = sum(1 for outcome in outcomes if outcome.passed)
    return f"{passed} passed, {len(outcomes) - passed} failed"


def run_test_files(
    machine: str | None, script: str | None, cases: list[str] | None, library: tuple[Path, ...] = ()
) -> list[ScenarioResult]:
    """``mkl test``: conformance ``cases``, or a machine file's scripted scenarios (its calls find ``library``'s
    too)."""
    if cases and (machine or script):
        raise UsageProblem("give either --case FILE... or MACHINE --script FILE, not both")
    if cases:
        return run_all(load_cases(cases))
    if machine and script:
        return run_all(load_scenarios(machine, script, library))
    raise UsageProblem("give conformance cases (--case FILE...) or a machine and its scenarios (MACHINE --script FILE)")
