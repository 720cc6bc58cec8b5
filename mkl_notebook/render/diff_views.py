"""Two runs side by side (``mkl diff``, ``%mkl diff``), HTML and text twins stating the same facts.

The diff is :mod:`app.diffing`'s, as a plain mapping (``RunDiff.as_dict()``): each run's facts (where it is, how
it ended, tokens, cost, time), where they part, each decision that differs and each output that differs with its
unified diff. Every text in it may come from a file someone sent: the HTML escapes it, the text shows it through
:func:`printable`, and a copy no trusted key signed says so in both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .audit_views import duration
from .common import NONE, _e, columns, money, printable, shorten, table_cell, table_row

Diff = Mapping[str, Any]
CELL = 60  # characters of a decision's value a text table shows (the outputs' diffs below are whole)
_WHAT = {
    "reply": "reply",
    "answerer": "who answered",
    "note": "note",
    "gate": "gate",
    "path": "path",
    "output": "output",
    "ending": "ending",
}


def _number(value: Any) -> str:
    return NONE if value is None else f"{value:,}"


def _made_by(side: Mapping[str, Any]) -> str:
    if "trusted" not in side:
        return ""
    return str(side.get("made_by") or "") + ("" if side["trusted"] else " (NOT TRUSTED: no key you trust signed it)")


def _facts_rows(diff: Diff) -> list[tuple[str, str, str]]:
    """The side-by-side facts of the two runs: (label, A's, B's)."""
    a, b = diff["a"], diff["b"]

    def row(label: str, shown: Any) -> tuple[str, str, str]:
        return (label, shown(a), shown(b))

    rows = [
        row("run", lambda s: s["spec"]),
        row("read from", lambda s: s["where"]),
        row("machine", lambda s: s.get("machine") or NONE),
        row("status", lambda s: s["status"] + (f" ({s['error']}) at {s['at']}" if s.get("error") else "")),
        row("steps", lambda s: _number(s["steps"])),
        row("answers", lambda s: _number(s["answers"])),
        row("tokens in / out", lambda s: f"{_number(s['input_tokens'])} / {_number(s['output_tokens'])}"),
        row("cost", lambda s: money(s["cost_usd"]) if s.get("cost_usd") is not None else "unknown"),
        row("model time", lambda s: duration(s.get("model_seconds"))),
        row("first to last record", lambda s: duration(s.get("elapsed_seconds"))),
    ]
    if "trusted" in a or "trusted" in b:
        rows.insert(2, row("made by", lambda s: _made_by(s) or NONE))
    return rows


def verdict(diff: Diff) -> str:
    """One sentence: identical, or the first step where the runs part and what parts them there."""
    if diff["identical"]:
        return "The runs are identical: given the same, the same path, decisions, outputs, answers and ending."
    given = diff.get("given") or []
    started = f"The runs were given different {', '.join(g['what'] for g in given)}" if given else ""
    parted = diff["parted"]
    if parted is None:
        return f"{started}, and took the same path with the same decisions, outputs, answers and ending."
    state_a, state_b = parted.get("state_a"), parted.get("state_b")
    where = state_a if state_a == state_b else f"{state_a or 'no step'} in A, {state_b or 'no step'} in B"
    what = {
        "reply": "the reply differs",
        "answerer": "who answered differs",
        "gate": "the gate's decision differs",
        "output": "the output differs",
        "path": "the path differs",
        "ending": "they end differently",
    }.get(parted["what"], parted["what"])
    said = f"part at step {parted['step']} ({where}): {what}."
    return f"{started}; they {said}" if started else f"The runs {said}"


def _step(entry: Mapping[str, Any]) -> str:
    a, b = entry.get("step_a"), entry.get("step_b")
    if a == b:
        return NONE if a is None else str(a)
    return f"{a if a is not None else NONE} / {b if b is not None else NONE}"


def _label(output: Mapping[str, Any]) -> str:
    """What an output of the diff is: "The result", or "The output of step 3 (send)"."""
    return "The result" if output["state"] == "result" else f"The output of step {_step(output)} ({output['state']})"


def _text(value: Any) -> str:
    return NONE if value is None else str(value)


def diff_text(diff: Diff) -> str:
    """The diff as text for a terminal: the facts side by side, the verdict, the decisions, the outputs' diffs."""
    lines = columns([("", "A", "B"), *_facts_rows(diff)])
    lines += ["", printable(verdict(diff))]
    if diff.get("given"):
        given = [
            ("given", "A", "B"),
            *((g["what"], shorten(g["a"], CELL), shorten(g["b"], CELL)) for g in diff["given"]),
        ]
        lines += ["", "Given differently:", *("  " + line for line in columns(given))]
    if diff["decisions"]:
        rows = [("step", "state", "what", "A", "B")]
        rows += [
            (
                _step(d),
                _text(d.get("state")),
                _WHAT.get(d["what"], d["what"]),
                shorten(_text(d.get("a")), CELL),
                shorten(_text(d.get("b")), CELL),
            )
            for d in diff["decisions"]
        ]
        lines += ["", "Decisions that differ:", *("  " + line for line in columns(rows))]
    for output in diff["outputs"]:
        label = _label(output)
        lines += ["", f"{printable(label)} differs:"]
        lines += ["  " + printable(line) for line in output["diff"].splitlines()]
    return "\n".join(lines)


def _pre(text: str) -> str:
    return f"<pre>{_e(text)}</pre>"


def _facts_html(rows: Sequence[tuple[str, str, str]]) -> str:
    head = table_row(["", "A", "B"], tag="th")
    body = "".join(
        "<tr>" + table_cell(f"<strong>{_e(label)}</strong>") + table_cell(_e(a)) + table_cell(_e(b)) + "</tr>"
        for label, a, b in rows
    )
    return f"<table><thead>{head}</thead><tbody>{body}</tbody></table>"


def diff_html(diff: Diff) -> str:
    """The diff as HTML for a notebook: the same facts as :func:`diff_text`, in tables, every text escaped."""
    parts = [_facts_html(_facts_rows(diff)), f"<p>{_e(verdict(diff))}</p>"]
    if diff.get("given"):
        head = table_row(["given", "A", "B"], tag="th")
        body = "".join(table_row([_e(g["what"]), _e(g["a"]), _e(g["b"])]) for g in diff["given"])
        parts.append(f"<p>Given differently:</p><table><thead>{head}</thead><tbody>{body}</tbody></table>")
    if diff["decisions"]:
        head = table_row(["step", "state", "what", "A", "B"], tag="th")
        body = "".join(
            table_row(
                [
                    _e(_step(d)),
                    _e(_text(d.get("state"))),
                    _e(_WHAT.get(d["what"], d["what"])),
                    _e(_text(d.get("a"))),
                    _e(_text(d.get("b"))),
                ]
            )
            for d in diff["decisions"]
        )
        parts.append(f"<p>Decisions that differ:</p><table><thead>{head}</thead><tbody>{body}</tbody></table>")
    for output in diff["outputs"]:
        label = _label(output)
        head = table_row(["A", "B"], tag="th")
        side_by_side = table_row([_pre(output["a"]), _pre(output["b"])])
        parts.append(
            f"<p>{_e(label)} differs:</p><table><thead>{head}</thead><tbody>{side_by_side}</tbody></table>"
            f"<details><summary>unified diff</summary>{_pre(output['diff'])}</details>"
        )
    return "".join(parts)


def diff_bundle(diff: Diff) -> dict[str, str]:
    """What ``%mkl diff`` displays: the HTML and its text twin."""
    return {"text/html": diff_html(diff), "text/plain": diff_text(diff)}
