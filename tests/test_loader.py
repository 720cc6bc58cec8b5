"""Loading machine documents: what a user sees when a document is right, and when it is wrong."""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path

import pytest
import yaml

from mkl_notebook.lang.findings import MachineError
from mkl_notebook.lang.loader import analyse, load, load_file
from mkl_notebook.lang.model import Machine
from mkl_notebook.providers.scripted import ScriptError, read_script

VALID = """\
machine: triage
entry: draft
budget: 10
mklang: "0.4"
tools:
  - {name: search, description: looks things up}
hooks:
  - {name: is_ready, description: the draft is ready}
states:
  draft:
    structure: a support agent
    prompt: Draft a reply to {{ticket}}
    output: reply
    max_visits: 5
    gates:
      - {when: the reply is complete, hook: is_ready, then: ok, to: lookup}
      - {when: the reply has gaps, repair: 2, to: draft}
      - {when: otherwise, escalate: true, to: lookup, ask: "Approve?"}
  lookup:
    tool: search
    input: {q: "{{reply}}"}
    output: found
    gates:
      - {when: otherwise, then: ok, to: END}
"""

CALLER = """\
machine: caller
entry: c
budget: 3
states:
  c:
    call: helper
    output: out
    gates:
      - {when: otherwise, then: ok, to: END}
"""


def edit(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


def line_of(text: str, needle: str) -> int:
    for number, line in enumerate(text.splitlines(), start=1):
        if needle in line:
            return number
    raise AssertionError(needle)


def load_error(text: str) -> MachineError:
    with pytest.raises(MachineError) as caught:
        load(text)
    return caught.value


def assert_names(error: MachineError, line: int, *words: str) -> None:
    message = str(error)
    assert f"line {line}" in message, message
    for word in words:
        assert word in message, (word, message)


# -- a valid machine ---------------------------------------------------------------


def test_a_valid_machine_loads_into_the_model() -> None:
    machine = load(VALID)
    assert isinstance(machine, Machine)
    assert (machine.name, machine.entry, machine.budget, machine.mklang) == ("triage", "draft", 10, "0.4")
    assert list(machine.states) == ["draft", "lookup"]
    draft, lookup = machine.states["draft"], machine.states["lookup"]
    assert draft.kind == "generative" and draft.max_visits == 5
    assert [g.policy for g in draft.gates] == ["ok", "repair", "escalate"]
    assert draft.gates[1].repair == 2 and draft.gates[2].ask == "Approve?"
    assert draft.gates[0].line == line_of(VALID, "the reply is complete")
    assert lookup.kind == "tool" and lookup.tool == "search" and dict(lookup.input) == {"q": "{{reply}}"}
    assert [t.name for t in machine.tools] == ["search"] and [h.name for h in machine.hooks] == ["is_ready"]
    assert machine.source == VALID and len(machine.sha256) == 64


def test_a_valid_machine_has_no_error_findings() -> None:
    machine, findings = analyse(VALID)
    assert machine is not None
    assert [f for f in findings if f.severity == "error"] == []


def test_the_model_is_frozen() -> None:
    machine = load(VALID)
    with pytest.raises(dataclasses.FrozenInstanceError):
        machine.budget = 99  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        machine.states["draft"].prompt = "changed"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        machine.states["draft"].gates[0].to = "END"  # type: ignore[misc]
    with pytest.raises(TypeError):
        machine.states["new"] = machine.states["draft"]  # type: ignore[index]
    with pytest.raises(TypeError):
        machine.context["k"] = "v"  # type: ignore[index]


def test_a_call_state_loads_as_a_call() -> None:
    state = load(CALLER).states["c"]
    assert state.kind == "call" and state.call == "helper"
    assert load(CALLER).called_machines() == ("helper",)


# -- every load error names the line, the state and the key -----------------------


def test_unknown_key_in_a_state() -> None:
    text = edit(VALID, "    output: reply\n", "    output: reply\n    colour: red\n")
    assert_names(load_error(text), line_of(text, "colour"), "draft", "colour")


def test_unknown_top_level_key() -> None:
    text = edit(VALID, "budget: 10\n", "budget: 10\nbudgett: 3\n")
    assert_names(load_error(text), 4, "budgett")


def test_tier_on_a_tool_state_is_misplaced() -> None:
    text = edit(VALID, "    tool: search\n", "    tool: search\n    tier: fast\n")
    error = load_error(text)
    assert_names(error, line_of(text, "tier: fast"), "lookup", "tier")
    assert error.findings[0].code == "misplaced-key"


def test_structure_on_a_call_state_is_misplaced() -> None:
    text = edit(CALLER, "    call: helper\n", "    call: helper\n    structure: s\n")
    assert_names(load_error(text), 7, "'c'", "structure")


def test_a_state_with_both_tool_and_call() -> None:
    text = edit(VALID, "    tool: search\n", "    tool: search\n    call: other\n")
    error = load_error(text)
    assert_names(error, line_of(text, "tool: search"), "lookup", "'tool'", "'call'")


def test_sample_together_with_over() -> None:
    text = edit(VALID, "    output: reply\n", '    output: reply\n    sample: 3\n    over: "{{items}}"\n')
    assert_names(load_error(text), line_of(text, "over:"), "draft", "'sample'", "'over'")


def test_a_gate_with_no_policy() -> None:
    text = edit(VALID, "{when: otherwise, then: ok, to: END}", "{when: otherwise, to: END}")
    assert_names(
        load_error(text), line_of(text, "{when: otherwise, to: END}"), "lookup", "gate 1", "policy", "found none"
    )


def test_a_gate_with_two_policies() -> None:
    text = edit(
        VALID,
        "{when: the reply has gaps, repair: 2, to: draft}",
        "{when: the reply has gaps, repair: 2, then: ok, to: draft}",
    )
    assert_names(load_error(text), line_of(text, "the reply has gaps"), "draft", "gate 2", "ok, repair")


def test_to_naming_no_state() -> None:
    text = edit(VALID, "repair: 2, to: draft}", "repair: 2, to: drafft}")
    assert_names(load_error(text), line_of(text, "drafft"), "draft", "gate 2", "to: drafft", "names no state")


def test_entry_naming_no_state() -> None:
    text = edit(VALID, "entry: draft", "entry: start")
    assert_names(load_error(text), 2, "entry", "start")


@pytest.mark.parametrize("key", ["entry", "budget", "machine", "states"])
def test_a_missing_top_level_key(key: str) -> None:
    if key == "states":
        text = VALID[: VALID.index("states:")]
    else:
        text = "".join(line for line in VALID.splitlines(keepends=True) if not line.startswith(f"{key}:"))
    error = load_error(text)
    assert f"'{key}:'" in str(error) and "line 1" in str(error)


def test_a_yaml_syntax_error_names_its_line() -> None:
    text = edit(VALID, "    output: found\n", "    output: [found\n")
    error = load_error(text)
    assert "does not parse" in str(error)
    assert error.findings[0].line is not None and error.findings[0].line >= line_of(text, "[found")


def test_a_tab_indented_document_names_its_line() -> None:
    error = load_error("machine: m\nstates:\n\ta: 1\n")
    assert "line 3" in str(error)


def test_a_duplicate_key_in_a_state() -> None:
    text = edit(VALID, "    output: reply\n", "    output: reply\n    output: again\n")
    assert_names(load_error(text), line_of(text, "output: again"), "draft", "output", "twice")


def test_a_duplicate_top_level_key() -> None:
    text = edit(VALID, "budget: 10\n", "budget: 10\nbudget: 12\n")
    assert_names(load_error(text), 4, "budget", "twice")


def test_a_duplicate_key_in_a_gate() -> None:
    text = edit(VALID, "{when: otherwise, then: ok, to: END}", "{when: otherwise, then: ok, to: END, to: lookup}")
    assert_names(load_error(text), line_of(text, "to: END, to: lookup"), "lookup", "'to'", "twice")


@pytest.mark.parametrize(
    ("old", "new", "words"),
    [
        ("budget: 10", "budget: ten", ("budget", "whole number", "text")),
        ("budget: 10", "budget: 0", ("budget", "at least 1")),
        ("    output: reply", "    output: [a, b]", ("draft", "output", "a list")),
        ("    max_visits: 5", "    max_visits: yes", ("draft", "max_visits", "a boolean")),
        ('    input: {q: "{{reply}}"}', "    input: [q]", ("lookup", "input", "mapping")),
        ("      - {when: otherwise, then: ok, to: END}", "      - just text", ("lookup", "gate 1", "mapping")),
        ("{when: the reply has gaps, repair: 2", "{when: the reply has gaps, repair: two", ("draft", "repair")),
        ("{when: the reply has gaps, repair: 2", "{when: the reply has gaps, repair: 0", ("draft", "at least 1")),
        ("escalate: true, to: lookup", "escalate: yes please, to: lookup", ("draft", "escalate", "only be true")),
    ],
)
def test_a_wrong_type_names_state_and_key(old: str, new: str, words: tuple[str, ...]) -> None:
    text = edit(VALID, old, new)
    assert_names(load_error(text), line_of(text, new.strip()), *words)


def test_gates_that_are_not_a_list() -> None:
    text = edit(CALLER, "    gates:\n      - {when: otherwise, then: ok, to: END}\n", "    gates: otherwise\n")
    assert_names(load_error(text), 8, "'c'", "gates", "list")


def test_every_error_is_collected_with_its_position() -> None:
    text = edit(VALID, "    output: reply\n", "    output: reply\n    colour: red\n")
    text = edit(text, "    tool: search\n", "    tool: search\n    tier: fast\n")
    error = load_error(text)
    assert "and 1 more error" in str(error)
    assert [(f.code, f.state, f.key, f.line) for f in error.findings] == [
        ("unknown-key", "draft", "colour", line_of(text, "colour")),
        ("misplaced-key", "lookup", "tier", line_of(text, "tier")),
    ]


def test_a_document_that_is_not_a_mapping() -> None:
    for text in ("- a\n- b\n", "just words\n", "", "42"):
        with pytest.raises(MachineError, match="YAML mapping"):
            load(text)


def test_text_that_is_not_a_string() -> None:
    with pytest.raises(MachineError, match="must be YAML text"):
        load(b"machine: m")  # type: ignore[arg-type]


# -- values PyYAML itself cannot build are load errors, not crashes ----------------


@pytest.mark.parametrize(
    "value",
    [
        "2020-13-45",  # resolves as a timestamp with month 13
        "!!int abc",
        "!!float abc",
        "1" * 5000,  # more digits than Python converts
        "0x" + "f" * 4000,  # converts, but could never be printed
        "\ud800",  # a lone surrogate
    ],
)
def test_unbuildable_values_are_machine_errors(value: str) -> None:
    text = edit(VALID, "machine: triage", f"machine: {value}")
    error = load_error(text)
    assert "line 1" in str(error)
    with pytest.raises(MachineError):
        load(text, strict=False)


def test_odd_digit_text_is_a_wrong_type_not_a_crash() -> None:
    for budget in ("'²'", "'--5'"):
        error = load_error(edit(VALID, "budget: 10", f"budget: {budget}"))
        assert_names(error, 3, "budget", "whole number")


def test_a_pathological_on_error_pattern_is_a_bad_value() -> None:
    pattern = "(" * 2000 + ")" * 2000
    text = edit(VALID, "    output: found\n", f"    output: found\n    on_error: [{{match: '{pattern}', retry: 1}}]\n")
    assert_names(load_error(text), line_of(text, "on_error"), "lookup", "not a valid pattern")


# -- the unvalidated load of the scenario runner ----------------------------------


def test_non_strict_load_accepts_structure_on_a_call_state() -> None:
    text = edit(CALLER, "    call: helper\n", "    call: helper\n    structure: s\n")
    machine = load(text, strict=False)
    assert machine.states["c"].kind == "call"


def test_non_strict_kind_comes_from_key_presence() -> None:
    text = """\
machine: m
entry: a
budget: 1
states:
  a: {tool: t, call: c, prompt: p, output: o, gates: [{when: otherwise, then: ok, to: b}]}
  b: {call: c, prompt: p, tier: fast, output: o, gates: [{when: otherwise, then: ok, to: d}]}
  d: {output: o, gates: [{when: otherwise, then: ok, to: END}]}
"""
    with pytest.raises(MachineError):
        load(text)
    machine = load(text, strict=False)
    assert [s.kind for s in machine.states.values()] == ["tool", "call", "generative"]
    assert machine.states["a"].tool == "t" and machine.states["a"].call is None
    assert machine.states["b"].prompt == "" and machine.states["b"].tier == "fast"
    assert machine.states["d"].structure is None


def test_non_strict_load_runs_invalid_graphs_and_unknown_keys() -> None:
    text = edit(VALID, "repair: 2, to: draft}", "repair: 2, to: nowhere}")
    text = edit(text, "    output: reply\n", "    output: reply\n    colour: red\n")
    machine = load(text, strict=False)
    assert machine.states["draft"].gates[1].to == "nowhere"


def test_non_strict_load_still_needs_a_machine() -> None:
    with pytest.raises(MachineError, match="'entry:'"):
        load("machine: m\nbudget: 1\nstates: {a: {output: o, gates: []}}\n", strict=False)
    with pytest.raises(MachineError, match="does not parse"):
        load("machine: [\n", strict=False)


# -- files --------------------------------------------------------------------------


def test_load_file_reads_a_machine(tmp_path: Path) -> None:
    path = tmp_path / "triage.mkl"
    path.write_text(VALID, encoding="utf-8")
    assert load_file(path).name == "triage"


def test_load_file_on_a_missing_file_is_a_machine_error(tmp_path: Path) -> None:
    with pytest.raises(MachineError, match="no such file"):
        load_file(tmp_path / "absent.mkl")


def test_load_file_on_a_directory_or_binary_is_a_machine_error(tmp_path: Path) -> None:
    with pytest.raises(MachineError, match="directory"):
        load_file(tmp_path)
    binary = tmp_path / "binary.mkl"
    binary.write_bytes(b"machine: \xff\xfe\n")
    with pytest.raises(MachineError, match="not UTF-8"):
        load_file(binary)


def test_load_file_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.mkl"
    path.write_text(edit(VALID, "budget: 10", "budget: ten"), encoding="utf-8")
    with pytest.raises(MachineError) as caught:
        load_file(path)
    assert str(caught.value).startswith(f"{path}: line 3")


def test_an_on_error_pattern_python_frowns_on_loads_silently() -> None:
    text = edit(VALID, "    output: found\n", "    output: found\n    on_error: [{match: '[[a]', retry: 1}]\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        machine, findings = analyse(text)
    assert machine is not None and [f.code for f in findings] == ["extension-key"]


# -- large machines, YAML's own readings, anchors -----------------------------------


def _linear(n: int) -> str:
    """A machine of ``n`` states in block style, as a person (or yaml.safe_dump) writes it."""
    states = {
        f"s{i}": {
            "structure": "one line",
            "prompt": f"step {i}",
            "output": f"o{i}",
            "gates": [{"when": "otherwise", "then": "ok", "to": f"s{i + 1}" if i + 1 < n else "END"}],
        }
        for i in range(n)
    }
    return yaml.safe_dump({"machine": "long", "entry": "s0", "budget": n + 5, "states": states}, sort_keys=False)


def position_of(text: str, needle: str, after: str = "") -> tuple[int, int]:
    """The 1-based line and column where ``needle`` first starts (after the first ``after``)."""
    offset = text.index(needle, text.index(after) if after else 0)
    return text.count("\n", 0, offset) + 1, offset - (text.rfind("\n", 0, offset) + 1) + 1


def test_errors_in_a_large_machine_name_their_line_and_column() -> None:
    text = _linear(3000)
    text = edit(text, "    output: o2990\n", "    output: [o2990]\n")
    text = edit(text, "    output: o2995\n", "    output: o2995\n    colour: red\n")
    text = edit(
        text,
        "    - when: otherwise\n      then: ok\n      to: END\n",
        "    - {when: otherwise, then: ok, to: END, to: s0}\n",
    )
    findings = load_error(text).findings
    assert [(f.code, f.state, f.key, f.line, f.column) for f in findings] == [
        ("wrong-type", "s2990", "output", *position_of(text, "output: [o2990]")),
        ("unknown-key", "s2995", "colour", *position_of(text, "colour: red")),
        ("duplicate-key", "s2999", "to", *position_of(text, "to: s0")),
    ]
    machine = load(_linear(3000))
    assert machine.states["s2999"].line == position_of(_linear(3000), "s2999:")[0] + 1  # its body starts below
    assert machine.states["s2999"].gates[0].line == position_of(_linear(3000), "- when", after="s2999:")[0]


YAML_1_1_CONTEXT = """\
machine: values
entry: a
budget: 3
context:
  booleans: [yes, no, on, off, Yes, NO, true, False, y, n]
  numbers: [0x1F, 0o17, 017, 1_000, -12, +3, 1.5e3, 6.8523015e+5, .inf, -.inf, 190:20:30, 0b101]
  nothing: [~, null, Null, ""]
  dates: [2020-01-02, 2020-01-02 10:11:12, 2001-12-14t21:59:43.10-05:00]
  quoted: ["yes", '0x1F', "~", '2020-01-02', "null"]
  tagged: [!!str 12, !!int "12", !!float "1", !!binary aGVsbG8=, !!bool "yes"]
  text: [otherwise, ok, "{{x}}", "it's", 'say "hi"', multi word text, "=", a:b]
states:
  a:
    structure: one line
    prompt: p
    output: o
    gates:
      - {when: otherwise, then: ok, to: END}
"""


def test_yaml_1_1_values_read_as_pyyaml_reads_them() -> None:
    context = dict(load(YAML_1_1_CONTEXT).context)
    assert context == yaml.safe_load(YAML_1_1_CONTEXT)["context"]
    assert [type(v) for v in context["booleans"]] == [bool] * 8 + [str] * 2  # y and n stay text
    assert context["numbers"][:3] == [31, "0o17", 15] and context["quoted"] == [
        "yes",
        "0x1F",
        "~",
        "2020-01-02",
        "null",
    ]


TOO_DEEP = "[" * 201 + "]" * 201


LATER_SYNTAX_ERROR = ("    output: found\n", "    output: [found\n")


@pytest.mark.parametrize(
    "edits",
    [
        [],  # loads
        [("    output: reply\n", "    output: reply\n    colour: red\n")],
        [("    output: reply\n", "    output: reply\n    output: again\n")],
        [("    output: found\n", "    output: found\n    <<: {tier: fast}\n")],
        [("budget: 10", "budget: 2020-13-45")],
        [("budget: 10", "budget: !!int abc")],
        [("budget: 10", f"budget: {TOO_DEEP}")],
        [("    output: found\n", f"    output: found\n    extra: {{{TOO_DEEP}: 1}}\n")],
        [("    output: found\n", "    output: found\n    ? {a: 1}\n    : 2\n")],
        [("budget: 10", "budget: 2020-13-45"), LATER_SYNTAX_ERROR],
        [("budget: 10", f"budget: {TOO_DEEP}"), LATER_SYNTAX_ERROR],
        [("    output: found\n", "    output: found\n---\nmachine: second\n")],
    ],
)
def test_an_anchor_changes_nothing_a_document_loads_to_or_is_refused_for(edits: list[tuple[str, str]]) -> None:
    # A document with an anchor is built from PyYAML's node graph, one without straight from the parser's
    # events: either way the same values, the same errors, at the same line and column.  The anchor comes
    # first, before whatever each case puts wrong.
    text = VALID
    for old, new in edits:
        text = edit(text, old, new)
    anchored = edit(text, "machine: triage", "machine: &name triage")
    outcomes = []
    for document in (text, anchored):
        machine, findings = analyse(document)
        states = dict(machine.states) if machine else None
        outcomes.append((states, [(f.code, f.message, f.line, f.column, f.state, f.key) for f in findings]))
    assert outcomes[0] == outcomes[1]
    assert bool(outcomes[0][0] and not outcomes[0][1]) == (not edits)


def test_a_bad_value_early_yields_to_a_syntax_error_further_on() -> None:
    text = edit(edit(VALID, "machine: triage", "machine: 2020-13-45"), *LATER_SYNTAX_ERROR)
    error = load_error(text)
    assert "does not parse" in str(error) and "2020-13-45" not in str(error)
    assert error.findings[0].line is not None and error.findings[0].line >= line_of(text, "[found")


def test_a_document_of_too_many_values_is_refused_without_aliases() -> None:
    error = load_error("machine: m\nwords: [" + "a, " * 500_001 + "]\n")
    assert_names(error, 2, "expands to more than 500000 values")


def test_a_merge_key_is_refused_where_it_stands() -> None:
    text = edit(VALID, "    output: found\n", "    output: found\n    <<: {tier: fast}\n")
    error = load_error(text)
    assert "merge keys" in str(error)
    assert (error.findings[0].line, error.findings[0].column) == position_of(text, "<<")


# -- script files -------------------------------------------------------------------

SCRIPT_1_1 = """\
llm:
  produce: [yes, "yes", 0x1F, 017, 1_000, .inf, ~, 2020-01-02, on, 'off', !!str 12, multi word]
  judge: [0]
tools:
  lookup: [{found: yes, count: 0o17, when: 2020-01-02 10:11:12}, "null", null]
hooks:
  ready: [yes, no, on, off]
"""


def test_a_script_reads_yaml_1_1_values_as_safe_load_does(tmp_path: Path) -> None:
    path = tmp_path / "script.yaml"
    path.write_text(SCRIPT_1_1, encoding="utf-8")
    assert read_script(path) == yaml.safe_load(SCRIPT_1_1)
    assert read_script(path)["hooks"]["ready"] == [True, False, True, False]


def test_a_script_that_does_not_parse_is_one_line_naming_its_position(tmp_path: Path) -> None:
    path = tmp_path / "script.yaml"
    path.write_text("llm:\n  produce: [a, b\n  judge: [0]\nhooks: {x: [yes]}\n: : :\n", encoding="utf-8")
    with pytest.raises(ScriptError) as caught:
        read_script(path)
    message = str(caught.value)
    assert "\n" not in message and "the YAML does not parse" in message and ", column " in message, message
    assert message.startswith(f"{path}: line ")
