"""Whatever text arrives, loading gives a Machine or a MachineError, and checking gives findings."""

from __future__ import annotations

import copy
import datetime
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mkl_notebook.lang.check import check
from mkl_notebook.lang.findings import Finding, MachineError
from mkl_notebook.lang.keys import ALL_STATE_KEYS, GATE_KEYS, TOP_KEYS
from mkl_notebook.lang.loader import analyse, load
from mkl_notebook.lang.model import Machine

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

VALID = """\
machine: triage
entry: draft
budget: 10
mklang: "0.4"
context: {ticket: {body: hello}}
tools:
  - {name: search, description: looks things up}
hooks:
  - {name: is_ready, description: the draft is ready}
states:
  draft:
    structure: a support agent
    prompt: Draft a reply to {{ticket.body}}
    output: reply
    tier: fast
    max_visits: 5
    gates:
      - {when: the reply is complete, hook: is_ready, then: ok, to: lookup}
      - {when: the reply has gaps, repair: 2, to: draft}
      - {when: otherwise, escalate: true, to: lookup, ask: "Approve?", reply_to: human.reply}
  lookup:
    tool: search
    input: {q: "{{reply}}"}
    output: found
    sample: 2
    on_error: [{match: timeout, retry: 2}]
    gates:
      - {when: otherwise, then: ok, to: fan}
  fan:
    call: helper
    over: "{{found}}"
    output: results
    accumulate: true
    gates:
      - {when: otherwise, then: ok, to: END}
      - {when: never, fail: true}
"""

SEED = yaml.safe_load(VALID)


def dump(value: Any) -> str:
    return yaml.dump(value, Dumper=yaml.CSafeDumper, sort_keys=False, allow_unicode=True)


KEYS = sorted(TOP_KEYS | ALL_STATE_KEYS | GATE_KEYS | {"name", "description", "match", "retry", "route"})
YAML_BITS = [
    ": ",
    "- ",
    "\n",
    "  ",
    "{",
    "}",
    "[",
    "]",
    ",",
    "'",
    '"',
    "#",
    "&a",
    "*a",
    "!!",
    "|",
    ">",
    "?",
    "\t",
    "---",
    "...",
    "%YAML 1.1",
    "<<",
    "END",
    "otherwise",
    "true",
    "null",
    "~",
    "0x1f",
    "1e9",
    ".nan",
    "2020-13-45",
    "{{x}}",
    "\\",
    "\x00",
    "\ud800",
    "\ufeff",
    *KEYS,
]


def assert_total(text: str) -> None:
    """The contract: load gives a Machine or a MachineError, check gives findings, and they agree."""
    _, structural = analyse(text)
    has_error = any(f.severity == "error" for f in structural)
    for strict in (True, False):
        try:
            machine = load(text, strict=strict)
        except MachineError as exc:
            assert str(exc)
            assert all(f.severity == "error" for f in exc.findings)
            assert has_error
        else:
            assert isinstance(machine, Machine)
            assert not (strict and has_error)
    findings = check(text)
    assert all(isinstance(f, Finding) for f in findings)
    assert "internal-error" not in [f.code for f in findings]
    assert [f.line or 0 for f in findings] == sorted(f.line or 0 for f in findings)
    assert all(f.message for f in findings)


# -- random text ----------------------------------------------------------------------


@SETTINGS
@given(st.text(st.characters(exclude_categories=()), max_size=200))
def test_any_text(text: str) -> None:
    assert_total(text)


@SETTINGS
@given(st.lists(st.sampled_from(YAML_BITS) | st.text(max_size=5), max_size=40).map("".join))
def test_yaml_ish_text(text: str) -> None:
    assert_total(text)


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(["[", "{a: ", "- ", "  - ", "a:\n" + " " * 2]), st.integers(50, 3000))
def test_deeply_nested_text(opener: str, depth: int) -> None:
    assert_total(opener * depth)


def test_nested_indented_mappings() -> None:
    assert_total("".join(f"{'  ' * level}k{level}:\n" for level in range(500)))


# -- random structures dumped to YAML -------------------------------------------------------


SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True)
    | st.text(max_size=20)
    | st.sampled_from(["END", "otherwise", "ok", "{{x}}", "fast", "list", "json", "0.4", "a", "b"])
    | st.dates()
    | st.datetimes(min_value=datetime.datetime(1900, 1, 1))
    | st.binary(max_size=8)
)
NAMES = st.sampled_from(KEYS) | st.sampled_from(["a", "b", "END"]) | st.text(max_size=8) | st.integers(-3, 3)


def containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.lists(children, max_size=4) | st.dictionaries(NAMES, children, max_size=5)


STRUCTURES = st.recursive(SCALARS, containers, max_leaves=30)


def machine_shaped() -> st.SearchStrategy[dict[str, Any]]:
    gate = st.dictionaries(st.sampled_from(sorted(GATE_KEYS)), SCALARS, max_size=4)
    state = st.dictionaries(st.sampled_from(sorted(ALL_STATE_KEYS)), SCALARS | st.lists(gate, max_size=3), max_size=6)
    top = {
        "machine": st.text(max_size=5),
        "entry": st.sampled_from(["a", "b", "c"]),
        "budget": SCALARS,
        "states": st.dictionaries(st.sampled_from(["a", "b", "c"]), state, max_size=3),
    }
    return st.fixed_dictionaries(
        {}, optional={**top, "tools": STRUCTURES, "hooks": STRUCTURES, "context": STRUCTURES, "mklang": SCALARS}
    )


@SETTINGS
@given(STRUCTURES)
def test_random_structures_dumped_to_yaml(value: Any) -> None:
    assert_total(dump(value))


@SETTINGS
@given(machine_shaped())
def test_machine_shaped_structures(value: dict[str, Any]) -> None:
    assert_total(dump(value))


# -- mutations of a valid machine --------------------------------------------------------------


def test_the_seed_document_is_valid() -> None:
    assert isinstance(load(VALID), Machine)


def _containers_of(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path] if isinstance(value, (dict, list)) and value else []
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in items:
        found += _containers_of(child, (*path, key))
    return found


def _at(value: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        value = value[key]
    return value


@st.composite
def structural_mutation(draw: st.DrawFn) -> str:
    doc = copy.deepcopy(SEED)
    container = _at(doc, draw(st.sampled_from(_containers_of(doc))))
    key = draw(st.sampled_from(list(container) if isinstance(container, dict) else list(range(len(container)))))
    action = draw(st.sampled_from(["drop", "retype", "rename"]))
    if action == "drop":
        del container[key]
    elif action == "retype":
        container[key] = draw(STRUCTURES)
    elif isinstance(container, dict):
        container[draw(NAMES)] = container.pop(key)
    else:
        container.insert(draw(st.integers(0, len(container))), container.pop(key))
    return dump(doc)


@SETTINGS
@given(structural_mutation())
def test_structural_mutations(text: str) -> None:
    assert_total(text)


@st.composite
def text_mutation(draw: st.DrawFn) -> str:
    text = VALID
    for _ in range(draw(st.integers(1, 4))):
        action = draw(st.sampled_from(["delete", "insert", "swap"]))
        if action == "delete" and text:
            start = draw(st.integers(0, len(text) - 1))
            text = text[:start] + text[start + draw(st.integers(1, 12)) :]
        elif action == "insert":
            at = draw(st.integers(0, len(text)))
            text = text[:at] + draw(st.sampled_from(YAML_BITS) | st.text(max_size=4)) + text[at:]
        else:
            lines = text.split("\n")
            i, j = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
            text = "\n".join(lines)
    return text


@SETTINGS
@given(text_mutation())
def test_text_mutations(text: str) -> None:
    assert_total(text)


@SETTINGS
@given(st.sampled_from(VALID.splitlines()), st.sampled_from(VALID.splitlines()))
def test_duplicated_lines(first: str, second: str) -> None:
    assert_total(VALID.replace(first, f"{first}\n{second}", 1))
