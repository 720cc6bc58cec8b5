"""Existing mklang machines run unchanged: the standard library, the built-in hooks, appending onto null,
and ``mkl check`` finding what the language's reference interpreter finds (docs/language.md)."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from mkl_notebook.engine.runner import run_machine
from mkl_notebook.lang import builtin_hooks, stdlib
from mkl_notebook.lang.check import check
from mkl_notebook.lang.findings import MachineError
from mkl_notebook.lang.loader import load
from mkl_notebook.providers.scripted import ScriptedOracle
from mkl_notebook.testing import load_scenarios, run_all

from support import mkl_cli

LIBRARY = Path(stdlib.__file__).resolve().parent.parent / "stdlib"


def _doc(text: str) -> str:
    return textwrap.dedent(text).lstrip()


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(_doc(text), encoding="utf-8")
    return path


# -- the standard library -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", stdlib.NAMES)
def test_each_library_machine_checks_clean_and_passes_its_own_scenarios(name: str) -> None:
    machine_path = LIBRARY / f"{name}.mkl"
    assert [f"{f.line}: {f.message}" for f in check(machine_path.read_text(encoding="utf-8"), ())] == []
    scenarios = load_scenarios(machine_path, LIBRARY / f"{name}.test.yaml")
    assert len(scenarios) >= 3
    failed = [(outcome.name, outcome.problems) for outcome in run_all(scenarios) if not outcome.passed]
    assert failed == []
    machine = stdlib.machine(name)
    assert machine.result == "answer" and "task" in machine.context


CALLER = """\
    mklang: "0.4"
    machine: caller
    entry: think
    budget: 6
    result: answer
    states:
      think:
        call: std_cot
        input: {task: "What is 6 x 7?"}
        output: answer
        gates: [{when: otherwise, then: ok, to: END}]
"""


def test_a_call_to_the_library_runs_from_the_command_line_and_in_a_scenario_file(tmp_path: Path) -> None:
    _write(tmp_path, "caller.mkl", CALLER)
    (tmp_path / "caller.script.yaml").write_text('llm: {produce: ["42"], judge: [1]}\n', encoding="utf-8")
    code, status, out, err = mkl_cli(tmp_path, "run", "caller.mkl", "--script", "caller.script.yaml")
    assert code == 0, err
    assert status["status"] == "done" and status["result"] == "42"
    assert "sub-run trace" in out

    scenarios = """\
        scenarios:
          - name: the library thinks
            llm: {produce: ["42"], judge: [1]}
            expect: {status: done, result: "42"}
    """
    _write(tmp_path, "caller.test.yaml", scenarios)
    code, _status, out, err = mkl_cli(tmp_path, "test", "caller.mkl", "--script", "caller.test.yaml")
    assert code == 0, out + err
    code, _status, out, _err = mkl_cli(tmp_path, "check", "caller.mkl")
    assert code == 0 and "no findings" in out


def _caller_of(name: str) -> tuple[str, dict[str, Any]]:
    """A machine that calls library machine ``name`` with the input of the library's first finished
    scenario, and that scenario's scripted answers and expectations."""
    scenarios = yaml.safe_load((LIBRARY / f"{name}.test.yaml").read_text(encoding="utf-8"))["scenarios"]
    scenario = next(s for s in scenarios if s["expect"]["status"] == "done" and "result" in s["expect"])
    given = scenario.get("input") or {}
    passed = ", ".join(f'{key}: "{{{{{key}}}}}"' for key in given)
    text = _doc(
        f"""\
        mklang: "0.4"
        machine: uses_{name}
        entry: go
        budget: 3
        result: answer
        states:
          go:
            call: {name}
            input: {{{passed}}}
            output: answer
            gates: [{{when: otherwise, then: ok, to: END}}]
        """
    )
    return text, scenario


@pytest.mark.parametrize("name", stdlib.NAMES)
def test_every_library_machine_answers_a_call_from_the_command_line(name: str, tmp_path: Path) -> None:
    text, scenario = _caller_of(name)
    (tmp_path / "caller.mkl").write_text(text, encoding="utf-8")
    script = {key: scenario[key] for key in ("llm", "tools", "hooks") if key in scenario}
    (tmp_path / "caller.script.yaml").write_text(yaml.safe_dump(script), encoding="utf-8")
    code, status, _out, err = mkl_cli(
        tmp_path,
        "run",
        "caller.mkl",
        "--script",
        "caller.script.yaml",
        "--input",
        json.dumps(scenario.get("input") or {}),
    )
    assert (code, status.get("status")) == (0, "done"), err + str(status)
    assert status["result"] == scenario["expect"]["result"]
    code, _status, out, err = mkl_cli(tmp_path, "check", "caller.mkl")
    assert code == 0, out + err
    expect = {"status": "done", "result": scenario["expect"]["result"]}
    scenarios = {
        "scenarios": [{"name": "calls the library", **script, "input": scenario.get("input") or {}, "expect": expect}]
    }
    (tmp_path / "caller.test.yaml").write_text(yaml.safe_dump(scenarios), encoding="utf-8")
    code, _status, out, err = mkl_cli(tmp_path, "test", "caller.mkl", "--script", "caller.test.yaml")
    assert code == 0 and "PASS calls the library" in out, out + err


def test_every_library_machine_answers_a_call_from_a_notebook_cell(shell: Any, load_mkl: Any, tmp_path: Path) -> None:
    import mkl_notebook

    load_mkl(lambda *args, **kwargs: None)
    for name in stdlib.NAMES:
        text, scenario = _caller_of(name)
        script = tmp_path / f"{name}.script.yaml"
        script.write_text(yaml.safe_dump({k: scenario[k] for k in ("llm", "tools", "hooks") if k in scenario}))
        shell.user_ns["given"] = scenario.get("input") or {}
        assert shell.run_cell("%%mkl\n" + text).success
        assert shell.run_cell(f"%mkl run uses_{name} --input $given --script {script} --no-hitl").success
        run = mkl_notebook.get_run(f"uses_{name}")
        assert (run.status, run.result) == ("done", scenario["expect"]["result"]), name


def test_every_section_the_code_readme_and_docs_cite_is_in_the_language_reference() -> None:
    root = LIBRARY.parent.parent
    reference = (root / "docs" / "language.md").read_text(encoding="utf-8")
    sections = set(re.findall(r"^## (\d+)\. ", reference, re.MULTILINE))
    chapters = set(re.findall(r"^##+ (.+)$", reference, re.MULTILINE))
    texts = [path.read_text(encoding="utf-8") for path in (root / "mkl_notebook").rglob("*.py")]
    texts.append((root / "README.md").read_text(encoding="utf-8"))
    texts += [path.read_text(encoding="utf-8") for path in (root / "docs").rglob("*.md") if path.name != "language.md"]
    cited = {number for text in texts for number in re.findall(r"language\.md\)? §(\d+)", text)}
    assert cited and cited <= sections, sorted(cited - sections)
    titled = {title for text in texts for title in re.findall(r'docs/language\.md, "([^"]+)"', text)}
    assert titled <= chapters, sorted(titled - chapters)


def test_a_machine_of_the_same_name_beside_the_caller_shadows_the_library(tmp_path: Path) -> None:
    _write(tmp_path, "caller.mkl", CALLER)
    _write(
        tmp_path,
        "mine.mkl",
        """\
        mklang: "0.4"
        machine: std_cot
        entry: say
        budget: 3
        result: answer
        states:
          say: {structure: one word, prompt: "Say hi.", output: answer, gates: [{when: otherwise, then: ok, to: END}]}
        """,
    )
    (tmp_path / "s.yaml").write_text('llm: {produce: {"Say hi": "mine"}}\n', encoding="utf-8")
    code, status, _out, err = mkl_cli(tmp_path, "run", "caller.mkl", "--script", "s.yaml")
    assert code == 0, err
    assert status["result"] == "mine"  # the sibling's std_cot, whose only state is 'say'


def test_the_notebook_lists_the_library_and_runs_a_call_to_it(shell: Any, load_mkl: Any, tmp_path: Path) -> None:
    from IPython.core.error import UsageError

    published: list[dict[str, Any]] = []
    load_mkl(lambda data, *args, **kwargs: published.append(dict(data)))
    assert shell.run_cell("%mkl stdlib").success
    listed = published[-1]["text/plain"]
    assert all(name in listed for name in stdlib.NAMES)
    assert shell.run_cell("%mkl stdlib std_refine").success
    assert "image/svg+xml" in published[-2]  # its diagram, then its source
    assert "machine: std_refine" in published[-1]["text/plain"]
    failed = shell.run_cell("%mkl stdlib std_nothing")
    assert isinstance(failed.error_in_exec, UsageError) and "std_cot" in str(failed.error_in_exec)

    script = tmp_path / "caller.script.yaml"
    script.write_text('llm: {produce: ["42"], judge: [1]}\n', encoding="utf-8")
    assert shell.run_cell("%%mkl\n" + _doc(CALLER)).success
    assert shell.run_cell(f"%mkl run caller --script {script} --no-hitl").success
    import mkl_notebook

    run = mkl_notebook.get_run("caller")
    assert (run.status, run.result) == ("done", "42")
    assert shell.run_cell("%mkl check caller").success


# -- mkl check finds what the reference's check finds ---------------------------------------------------


def test_check_refuses_an_unknown_call_target_naming_it_with_its_line(tmp_path: Path) -> None:
    text = CALLER.replace("call: std_cot", "call: std_nothing")
    _write(tmp_path, "caller.mkl", text)
    code, status, out, _err = mkl_cli(tmp_path, "check", "caller.mkl")
    assert code == 1 and status["errors"] == 1
    assert "caller.mkl:8:5: error: state 'think' calls machine 'std_nothing'" in out
    _write(
        tmp_path,
        "helper.mkl",
        """\
        machine: std_nothing
        entry: a
        budget: 3
        states:
          a: {structure: s, prompt: p, output: o, gates: [{when: otherwise, then: ok, to: END}]}
        """,
    )
    code, _status, out, _err = mkl_cli(tmp_path, "check", "caller.mkl")
    assert code == 0, out  # now a sibling file defines it


def _codes(text: str) -> list[str]:
    return [finding.code for finding in check(_doc(text), ())]


def test_check_warns_on_a_budget_with_no_room_for_a_repair() -> None:
    machine = """\
        machine: m
        entry: a
        budget: {budget}
        states:
          a: {{structure: s, prompt: p, output: o, gates: [{{when: otherwise, then: ok, to: b}}]}}
          b: {{structure: s, prompt: p, output: o, gates: [{{when: otherwise, then: ok, to: END}}]}}
    """
    assert "budget-no-headroom" in _codes(machine.format(budget=3))
    assert "budget-no-headroom" not in _codes(machine.format(budget=4))
    assert _codes(machine.format(budget=1)) == ["budget-below-shortest-path"]


def test_check_warns_on_parse_under_version_0_2_and_on_a_result_no_state_produces() -> None:
    machine = """\
        mklang: "{version}"
        machine: m
        entry: a
        budget: 5
        result: {result}
        states:
          a: {{structure: s, prompt: p, output: o, parse: list, gates: [{{when: otherwise, then: ok, to: END}}]}}
    """
    assert _codes(machine.format(version="0.2", result="o")) == ["version-feature"]
    assert _codes(machine.format(version="0.3", result="o")) == []
    found = check(_doc(machine.format(version="0.4", result="answer")), ())
    assert [(f.code, f.line) for f in found] == [("result-not-produced", 5)]


# -- decided strictness points (docs/language.md, "Differences from the reference interpreter") --------


def _machine(top: str = "", budget: str = "4") -> str:
    return _doc(
        f"""\
        {top}
        machine: m
        entry: a
        budget: {budget}
        states:
          a: {{structure: s, prompt: p, output: o, gates: [{{when: otherwise, then: ok, to: END}}]}}
        """
    )


def test_version_0_2_0_is_0_2_and_an_unknown_version_is_only_a_warning() -> None:
    assert load(_machine('mklang: "0.2.0"')).mklang == "0.2"
    assert [(f.severity, f.code) for f in check(_machine('mklang: "0.5"'))] == [("warning", "unsupported-version")]
    assert load(_machine('mklang: "0.5"'), strict=False).name == "m"


def test_a_whole_number_float_budget_is_a_budget_and_a_fraction_is_refused() -> None:
    assert load(_machine(budget="4.0")).budget == 4
    with pytest.raises(MachineError, match="'budget' must be a whole number"):
        load(_machine(budget="3.5"))


@pytest.mark.parametrize("key", ["tools", "hooks"])
def test_a_bare_name_in_tools_or_hooks_is_refused_naming_it(key: str) -> None:
    with pytest.raises(MachineError, match=rf"line 1.*'{key}' item 1 \('calc'\) must be a mapping"):
        load(_machine(f"{key}: [calc]"))


# -- the built-in hooks -------------------------------------------------------------------------------

HOOKED = """\
    machine: m
    entry: a
    budget: 3
    states:
      a:
        structure: s
        prompt: p
        output: o
        gates:
          - {{when: the rule holds, hook: {hook}, then: ok, to: END}}
          - {{when: otherwise, fail: true}}
"""


@pytest.mark.parametrize(
    ("hook", "context", "output", "verdict"),
    [
        ("amount_le_100", {"amount": 100}, "", True),
        ("amount_le_100", {"amount": "99.5"}, "", True),
        ("amount_le_100", {"amount": 101}, "", False),
        ("amount_le_100", {"amount": "a lot"}, "", False),
        ("amount_le_100", {}, "", False),
        ("has_receipt", {"has_receipt": True}, "", True),
        ("has_receipt", {"has_receipt": ""}, "", False),
        ("auto_approve_ok", {"has_receipt": True, "amount": 20}, "", True),
        ("auto_approve_ok", {"has_receipt": False, "amount": 20}, "", False),
        ("auto_approve_ok", {"has_receipt": True, "amount": 200}, "", False),
        ("write_failed", {}, '{"written": false, "path": "x"}', True),
        ("write_failed", {}, '{"error": "disk full"}', True),
        ("write_failed", {}, '{"written": true, "error": null}', False),
        ("write_failed", {}, "wrote it", False),
        ("console_workspace_ready", {"workspace_required": False}, "", True),
        ("console_workspace_ready", {"workspace_required": True, "workspace_brief": "b", "observation": []}, "", False),
        (
            "console_workspace_ready",
            {"workspace_required": True, "workspace_brief": "b", "observation": ['{"tool": "read_workspace_file"}']},
            "",
            True,
        ),
        (
            "console_workspace_ready",
            {"workspace_required": True, "observation": ['{"tool": "list_workspace"}']},
            "",
            False,
        ),
        ("eq:mode:full", {"mode": " full "}, "", True),
        ("neq:mode:full", {"mode": "full"}, "", False),
    ],
)
def test_a_built_in_hook_decides_its_gate_in_a_run(
    hook: str, context: dict[str, Any], output: str, verdict: bool
) -> None:
    machine = load(_doc(HOOKED.format(hook=hook)), strict=False)
    assert "undeclared-hook" not in [f.code for f in check(machine.source)]
    result = run_machine(machine, ScriptedOracle({"produce": [output or "done"]}), context=context)
    assert (result.status == "done") is verdict, result.error
    if verdict:
        assert result.trace[0]["gate_via"] == "hook"
    else:
        assert "unknown hook" not in str(result.error)  # it answered false: the fail gate fired


def test_an_unknown_hook_still_halts_and_a_hosts_hook_of_a_built_in_name_wins() -> None:
    assert builtin_hooks.decide("no_such_hook", {}, "") is None
    machine = load(_doc(HOOKED.format(hook="has_receipt")), strict=False)
    hosted = ScriptedOracle({"produce": ["done"]}, hooks={"has_receipt": [False]})
    assert run_machine(machine, hosted, context={"has_receipt": True}).status == "halt"


# -- accumulate ---------------------------------------------------------------------------------------


def test_appending_onto_an_existing_null_wraps_it_and_onto_an_absent_key_starts_a_list() -> None:
    text = """\
        machine: m
        entry: a
        budget: 3
        result: notes
        context: {{notes: {start}}}
        states:
          a:
            structure: s
            prompt: p
            output: notes
            accumulate: true
            gates: [{{when: otherwise, then: ok, to: END}}]
    """
    wrapped = run_machine(load(_doc(text.format(start="")), strict=False), ScriptedOracle({"produce": ["first"]}))
    assert wrapped.result == [None, "first"]
    seeded = run_machine(load(_doc(text.format(start="seed")), strict=False), ScriptedOracle({"produce": ["first"]}))
    assert seeded.result == ["seed", "first"]
    absent = _doc(text.format(start="")).replace("context: {notes: }\n", "")
    assert run_machine(load(absent, strict=False), ScriptedOracle({"produce": ["first"]})).result == ["first"]


def test_a_misspelt_scenario_key_is_refused_naming_it_instead_of_testing_less(tmp_path: Path) -> None:
    _write(tmp_path, "caller.mkl", CALLER)
    _write(
        tmp_path,
        "caller.test.yaml",
        """\
        scenarios:
          - name: typo
            llm: {produce: ["42"], judge: [1]}
            inptu: {task: "What is 6 x 7?"}
            expect: {status: done}
        """,
    )
    code, _status, _out, err = mkl_cli(tmp_path, "test", "caller.mkl", "--script", "caller.test.yaml")
    assert code == 2 and err.count("\n") == 1
    assert "scenario 'typo' has unknown key(s) inptu" in err
