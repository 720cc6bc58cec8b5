"""Static checks: structural findings from the loader plus findings about the machine's graph."""

from __future__ import annotations

import pytest

from mkl_notebook.lang.check import check, check_machine, is_builtin_hook
from mkl_notebook.lang.findings import Finding
from mkl_notebook.lang.loader import load

CLEAN = """\
machine: clean
entry: a
budget: 5
tools:
  - {name: search, description: looks things up}
hooks:
  - {name: is_ready}
states:
  a:
    structure: s
    prompt: p
    output: o
    gates:
      - {when: ready, hook: is_ready, then: ok, to: b}
      - {when: otherwise, repair: 1, to: a}
      - {when: otherwise, fail: true}
  b:
    tool: search
    output: found
    gates:
      - {when: otherwise, then: ok, to: END}
"""


def machine(states: str, budget: int = 10, entry: str = "a", extra: str = "") -> str:
    return f"machine: m\nentry: {entry}\nbudget: {budget}\n{extra}states:\n{states}"


def codes(text: str) -> list[str]:
    return [finding.code for finding in check(text)]


def only(text: str, code: str) -> Finding:
    found = [finding for finding in check(text) if finding.code == code]
    assert len(found) == 1, check(text)
    return found[0]


def line_of(text: str, needle: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), start=1) if needle in line)


def test_a_clean_machine_has_no_findings() -> None:
    assert check(CLEAN) == []


def test_structural_findings_come_from_the_loader() -> None:
    text = CLEAN.replace("    output: o\n", "    output: o\n    colour: red\n")
    finding = only(text, "unknown-key")
    assert (finding.severity, finding.state, finding.key, finding.line) == ("error", "a", "colour", 13)


def test_findings_are_sorted_by_line() -> None:
    text = machine(
        "  a: {structure: s, prompt: p, output: o, gates: [{when: x, then: ok, to: a}]}\n"
        "  lonely: {structure: s, prompt: p, output: o, colour: red, gates: [{when: otherwise, then: ok, to: END}]}\n"
    )
    findings = check(text)
    assert [f.line for f in findings] == sorted(f.line or 0 for f in findings)
    assert {"no-path-to-end", "unreachable-state", "unknown-key", "no-catch-all"} <= set(codes(text))


def test_a_document_that_is_not_yaml_gives_its_findings() -> None:
    findings = check("machine: [unclosed\nentry: a\n")
    assert [f.code for f in findings] == ["yaml"] and findings[0].line is not None
    assert [f.code for f in check("- a list\n")] == ["not-a-mapping"]


def test_text_that_is_not_a_string() -> None:
    assert [f.code for f in check(b"machine: m")] == ["not-text"]  # type: ignore[arg-type]


# -- no-path-to-end -------------------------------------------------------------------


def test_no_path_to_end_is_an_error_at_the_entry_state() -> None:
    text = machine(
        "  a:\n    structure: s\n    prompt: p\n    output: o\n"
        "    gates:\n      - {when: otherwise, then: ok, to: b}\n"
        "  b: {structure: s, prompt: p, output: o, gates: [{when: otherwise, repair: 2, to: a}]}\n"
    )
    finding = only(text, "no-path-to-end")
    assert finding.severity == "error" and finding.state == "a"
    assert finding.line == line_of(text, "structure: s")
    assert "'a'" in finding.message and "END" in finding.message


def test_a_fail_gate_is_not_a_path_to_end() -> None:
    text = machine("  a: {structure: s, prompt: p, output: o, gates: [{when: otherwise, fail: true}]}\n")
    assert "no-path-to-end" in codes(text)


def test_end_only_in_an_unreachable_state_is_no_path() -> None:
    text = machine(
        "  a: {structure: s, prompt: p, output: o, gates: [{when: otherwise, then: ok, to: a}]}\n"
        "  z: {structure: s, prompt: p, output: o, gates: [{when: otherwise, then: ok, to: END}]}\n"
    )
    assert "no-path-to-end" in codes(text) and "unreachable-state" in codes(text)


@pytest.mark.parametrize("policy", ["then: ok", "repair: 1", "escalate: true"])
def test_every_non_fail_policy_reaches_end(policy: str) -> None:
    text = machine(
        f"  a: {{structure: s, prompt: p, output: o, gates: [{{when: otherwise, {policy}, to: b}}]}}\n"
        f"  b: {{structure: s, prompt: p, output: o, gates: [{{when: otherwise, {policy}, to: END}}]}}\n"
    )
    assert "no-path-to-end" not in codes(text)
    assert "unreachable-state" not in codes(text)


# -- budget-below-shortest-path ---------------------------------------------------------


CHAIN = """\
  a: {structure: s, prompt: p, output: o, gates: [{when: otherwise, then: ok, to: b}]}
  b: {structure: s, prompt: p, output: o, sample: 3, gates: [{when: otherwise, then: ok, to: c}]}
  c: {structure: s, prompt: p, output: o, gates: [{when: done, then: ok, to: END}, {when: otherwise, repair: 1, to: a}]}
"""


def test_budget_below_the_shortest_path_is_an_error_at_the_budget_line() -> None:
    text = machine(CHAIN, budget=2)
    finding = only(text, "budget-below-shortest-path")
    assert finding.severity == "error" and finding.key == "budget" and finding.line == 3
    assert "budget 2" in finding.message and "3 steps" in finding.message
    assert "a -> b -> c -> END" in finding.message


def test_a_budget_equal_to_the_shortest_path_is_enough() -> None:
    assert "budget-below-shortest-path" not in codes(machine(CHAIN, budget=3))


def test_the_shortest_of_several_paths_counts() -> None:
    shortcut = CHAIN.replace(
        "gates: [{when: otherwise, then: ok, to: b}]",
        "gates: [{when: quick, then: ok, to: END}, {when: otherwise, then: ok, to: b}]",
    )
    assert "budget-below-shortest-path" not in codes(machine(shortcut, budget=1))


def test_entering_the_entry_state_counts_one_step() -> None:
    single = "  a: {structure: s, prompt: p, output: o, gates: [{when: otherwise, then: ok, to: END}]}\n"
    assert "budget-below-shortest-path" not in codes(machine(single, budget=1))


def test_no_budget_finding_when_there_is_no_path() -> None:
    text = machine("  a: {structure: s, prompt: p, output: o, gates: [{when: otherwise, then: ok, to: a}]}\n", 1)
    assert "budget-below-shortest-path" not in codes(text)


# -- unreachable-state --------------------------------------------------------------------


def test_an_unreachable_state_is_a_warning_at_its_line() -> None:
    text = (
        CLEAN + "  orphan:\n    structure: s\n    prompt: p\n    output: o\n"
        "    gates:\n      - {when: otherwise, then: ok, to: END}\n"
    )
    finding = only(text, "unreachable-state")
    assert finding.severity == "warning" and finding.state == "orphan"
    assert (finding.line, finding.column) == (line_of(text, "orphan:"), 3)  # the state's name, where it is written
    assert "'orphan'" in finding.message and "'a'" in finding.message


def test_a_feature_of_a_later_version_is_warned_at_its_key() -> None:
    text = (
        'mklang: "0.3"\nmachine: m\nentry: a\nbudget: 5\nstates:\n  a:\n    structure: s\n    prompt: p\n'
        "    output: o\n    max_visits: 2\n    gates:\n      - {when: otherwise, then: ok, to: END}\n"
    )
    finding = only(text, "version-feature")
    assert (finding.line, finding.column) == (line_of(text, "max_visits:"), 5) and "max_visits" in finding.message


def test_states_reached_through_escalate_and_repair_gates_are_reachable() -> None:
    text = machine(
        "  a: {structure: s, prompt: p, output: o, gates: [{when: x, escalate: true, to: h}, "
        "{when: otherwise, repair: 1, to: r}]}\n"
        "  h: {structure: s, prompt: p, output: o, gates: [{when: otherwise, then: ok, to: END}]}\n"
        "  r: {structure: s, prompt: p, output: o, gates: [{when: otherwise, then: ok, to: END}]}\n"
    )
    assert "unreachable-state" not in codes(text)


def test_a_state_reached_only_by_an_on_error_route_is_reachable() -> None:
    text = machine(
        "  a: {tool: search, output: o, on_error: [{match: timeout, route: recover}], "
        "gates: [{when: otherwise, then: ok, to: END}]}\n"
        "  recover: {structure: s, prompt: p, output: o, gates: [{when: otherwise, then: ok, to: END}]}\n",
        extra="tools: [{name: search}]\n",
    )
    assert "unreachable-state" not in codes(text)


# -- catch-all gates ------------------------------------------------------------------------


def test_a_state_without_otherwise_is_warned() -> None:
    text = machine(
        "  a:\n    structure: s\n    prompt: p\n    output: o\n"
        "    gates:\n      - {when: good, then: ok, to: END}\n      - {when: bad, fail: true}\n"
    )
    finding = only(text, "no-catch-all")
    assert finding.severity == "warning" and finding.state == "a" and finding.line == 6
    assert "otherwise" in finding.message


def test_otherwise_is_recognised_in_any_case() -> None:
    text = machine("  a: {structure: s, prompt: p, output: o, gates: [{when: '  OtherWise ', then: ok, to: END}]}\n")
    assert codes(text) == []


def test_a_repair_only_catch_all_is_warned_at_the_gate() -> None:
    text = machine(
        "  a:\n    structure: s\n    prompt: p\n    output: o\n"
        "    gates:\n      - {when: good, then: ok, to: END}\n      - {when: otherwise, repair: 2, to: a}\n"
    )
    finding = only(text, "repair-only-catch-all")
    assert finding.severity == "warning" and finding.state == "a"
    assert finding.line == line_of(text, "repair: 2")
    assert "no-catch-all" not in codes(text)


def test_a_repair_catch_all_followed_by_a_final_one_is_fine() -> None:
    assert "repair-only-catch-all" not in codes(CLEAN)


# -- max-visits-under-repair ------------------------------------------------------------------


def repairing(max_visits: int, repair: int) -> str:
    return machine(
        "  a:\n    structure: s\n    prompt: p\n    output: o\n"
        f"    max_visits: {max_visits}\n"
        f"    gates:\n      - {{when: gaps, repair: {repair}, to: a}}\n"
        "      - {when: otherwise, then: ok, to: END}\n",
        extra='mklang: "0.4"\n',
    )


@pytest.mark.parametrize(("max_visits", "repair"), [(2, 2), (1, 3)])
def test_max_visits_at_or_under_a_repair_budget_is_warned(max_visits: int, repair: int) -> None:
    text = repairing(max_visits, repair)
    finding = only(text, "max-visits-under-repair")
    assert finding.severity == "warning" and finding.state == "a" and finding.key == "max_visits"
    assert finding.line == line_of(text, "max_visits")
    assert f"max_visits {max_visits}" in finding.message and f"repair budget {repair}" in finding.message


def test_max_visits_above_every_repair_budget_is_fine() -> None:
    assert check(repairing(3, 2)) == []


# -- declarations --------------------------------------------------------------------------------


def test_an_undeclared_tool_is_warned_at_its_key() -> None:
    text = CLEAN.replace("    tool: search", "    tool: lookup")
    finding = only(text, "undeclared-tool")
    assert finding.severity == "warning" and finding.state == "b" and finding.key == "tool"
    assert finding.line == line_of(text, "tool: lookup") and "'lookup'" in finding.message


def test_a_tool_is_undeclared_when_there_is_no_tools_list() -> None:
    text = CLEAN.replace("tools:\n  - {name: search, description: looks things up}\n", "")
    assert only(text, "undeclared-tool").state == "b"
    assert only(text.replace("hooks:", "tools: []\nhooks:"), "undeclared-tool").state == "b"


def test_an_undeclared_hook_is_warned_at_its_gate() -> None:
    text = CLEAN.replace("hook: is_ready", "hook: is_done")
    finding = only(text, "undeclared-hook")
    assert finding.severity == "warning" and finding.state == "a" and finding.key == "hook"
    assert finding.line == line_of(text, "is_done") and "'is_done'" in finding.message


@pytest.mark.parametrize("hook", ["always_true", "always_false", "eq:status:open", "neq:status:", "eq:k:a:b"])
def test_built_in_hooks_need_no_declaration(hook: str) -> None:
    text = CLEAN.replace("hook: is_ready", f"hook: '{hook}'")
    assert "undeclared-hook" not in codes(text)
    assert is_builtin_hook(hook)


@pytest.mark.parametrize("hook", ["eq:status", "neq", "always", "eqstatus:open"])
def test_malformed_parametric_hooks_are_not_built_in(hook: str) -> None:
    assert not is_builtin_hook(hook)
    assert "undeclared-hook" in codes(CLEAN.replace("hook: is_ready", f"hook: '{hook}'"))


# -- check_machine on a leniently loaded machine -----------------------------------------------------


def test_check_machine_reports_graph_findings_only() -> None:
    text = machine(
        "  a: {call: helper, structure: s, output: o, gates: [{when: otherwise, then: ok, to: a}]}\n", budget=1
    )
    findings = check_machine(load(text, strict=False))
    assert [f.code for f in findings] == ["no-path-to-end"]


def test_a_missing_entry_state_skips_the_path_checks() -> None:
    text = machine(
        "  a: {structure: s, prompt: p, output: o, gates: [{when: otherwise, then: ok, to: END}]}\n", entry="nowhere"
    )
    assert codes(text) == ["bad-reference"]


def test_a_long_shortest_path_is_abbreviated() -> None:
    states = (
        "".join(
            f"  s{i}: {{structure: s, prompt: p, output: o, gates: [{{when: otherwise, then: ok, to: s{i + 1}}}]}}\n"
            for i in range(19)
        )
        + "  s19: {structure: s, prompt: p, output: o, gates: [{when: otherwise, then: ok, to: END}]}\n"
    )
    finding = only(machine(states, budget=5, entry="s0"), "budget-below-shortest-path")
    assert "20 steps" in finding.message
    assert "s0 -> s1 -> s2 -> s3 -> ... -> s17 -> s18 -> s19 -> END" in finding.message
    assert "raise budget to at least 20" in finding.message


# -- ask-never-shown ---------------------------------------------------------------------------


def test_an_ask_on_an_escalate_gate_to_end_is_warned_never_shown() -> None:
    text = machine(
        "  a:\n    structure: s\n    prompt: p\n    output: o\n"
        "    gates:\n      - {when: risky, escalate: true, to: END, ask: 'Really end?'}\n"
        "      - {when: otherwise, then: ok, to: END}\n",
        extra='mklang: "0.4"\n',
    )
    finding = only(text, "ask-never-shown")
    assert finding.severity == "warning" and finding.state == "a"
    assert finding.line == line_of(text, "Really end?")
    assert "never suspends" in finding.message and "gate 1" in finding.message


def test_an_ask_on_an_escalate_gate_to_a_state_is_shown_and_not_warned() -> None:
    text = machine(
        "  a:\n    structure: s\n    prompt: p\n    output: o\n"
        "    gates:\n      - {when: risky, escalate: true, to: b, ask: 'Go on?'}\n"
        "      - {when: otherwise, then: ok, to: END}\n"
        "  b:\n    structure: s\n    prompt: p\n    output: o2\n"
        "    gates:\n      - {when: otherwise, then: ok, to: END}\n",
        extra='mklang: "0.4"\n',
    )
    assert "ask-never-shown" not in codes(text)
