"""A batch of runs at a glance: one row per input row, as HTML with a text twin (``%mkl map``, ``mkl map``).

Each row of the table is one row summary (``app.batch.row_summary``): its run, status, result or
error, tokens and cost, and the question it waits on. Plain semantic HTML, every value escaped.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from .commands import continue_commands, resume_command, runs_command
from .common import NONE, answers_sentence, columns, money, shorten, table_row

HEAD = ("row", "run", "status", "result or error", "tokens", "cost", "waiting on")
_BATCH_NUMBERS = (0, 4, 5)  # the columns of numbers: row, tokens, cost
RESULT_PREVIEW = 60
QUESTION_PREVIEW = 60


def _result(row: Mapping[str, Any]) -> str:
    if row.get("status") == "done":
        value = row.get("result")
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
        return shorten(text, RESULT_PREVIEW)
    return shorten(str(row.get("error") or NONE), RESULT_PREVIEW)


def _tokens(row: Mapping[str, Any]) -> str:
    usage = row.get("usage") or {}
    return f"{int(usage.get('input_tokens') or 0) + int(usage.get('output_tokens') or 0):,}"


def _cost(row: Mapping[str, Any]) -> str:
    cost = (row.get("usage") or {}).get("cost_usd")
    return NONE if cost is None else money(cost)


def cells(row: Mapping[str, Any]) -> tuple[str, ...]:
    """One row of the table, as the strings both twins show."""
    asked = row.get("ask")
    return (
        str(row.get("row")),
        str(row.get("run")),
        str(row.get("status")),
        _result(row),
        _tokens(row),
        _cost(row),
        shorten(str(asked), QUESTION_PREVIEW) if asked else NONE,
    )


def caption(counts: Mapping[str, int]) -> str:
    total = sum(counts.values())
    parts = ", ".join(f"{count:,} {status}" for status, count in counts.items())
    return f"Batch — {total:,} row{'s' if total != 1 else ''}: {parts or 'none'}"


def batch_table_html(rows: Sequence[Mapping[str, Any]], counts: Mapping[str, int]) -> str:
    head = table_row([escape(name) for name in HEAD], _BATCH_NUMBERS, tag="th")
    body = "".join(
        table_row(
            [f"<code>{escape(cell)}</code>" if index == 1 else escape(cell) for index, cell in enumerate(cells(row))],
            _BATCH_NUMBERS,
        )
        for row in rows
    )
    return f"<table><caption>{escape(caption(counts))}</caption><thead>{head}</thead><tbody>{body}</tbody></table>"


def batch_table_text(rows: Sequence[Mapping[str, Any]], counts: Mapping[str, int]) -> str:
    return "\n".join([caption(counts), *columns([HEAD, *(cells(row) for row in rows)])])


TABLE_ROWS = 50  # rows of a batch ``mkl map`` prints in its table; a larger batch's status line and store have the rest


def batch_summary_text(
    rows: Sequence[Mapping[str, Any]],
    counts: Mapping[str, int],
    spent: Mapping[str, Any],
    store: str | None,
    *,
    listed: bool,
) -> str:
    """After ``mkl map``: the table of its rows (``rows``: the row summaries kept, ``listed`` when they are every
    row), or for a batch of many rows its counts, tokens and cost, the first rows that are not done, and where
    every row is."""
    total = sum(counts.values())
    if listed and total <= TABLE_ROWS:
        return batch_table_text(rows, counts)
    cost = spent.get("cost_usd")
    lines = [f"{caption(counts)} · {spent.get('tokens', 0):,} tokens · cost {NONE if cost is None else money(cost)}"]
    shown = rows[:TABLE_ROWS]
    if shown:
        lines += columns([HEAD, *(cells(row) for row in shown)])
    left = total - len(shown)
    if listed:
        kept = "the status line below holds them"
    elif rows:
        kept = f"the status line below holds the {len(rows):,} first in order that are not done"
    else:
        kept = "every one is done"
    if left:
        lines.append(f"{left:,} more row{'s' if left != 1 else ''}: {kept}; `{runs_command(store)}` lists every run.")
    return "\n".join(lines)


def batch_bundle(rows: Sequence[Mapping[str, Any]], counts: Mapping[str, int]) -> dict[str, str]:
    return {"text/html": batch_table_html(rows, counts), "text/plain": batch_table_text(rows, counts)}


def _waiting_text(run_id: str, result: Any, notebook: str | None) -> str:
    lines = [f"{run_id} asks: {result.ask or result.question}"]
    base = resume_command(run_id, notebook=notebook, started_with=result.started_with)
    commands = continue_commands(result, base, result.question_id(run_id))
    return "\n".join([*lines, *(f"  {command}" for command in commands)])


SHOWN_WAITING = 3  # rows of a batch whose commands are printed after it; more are listed by `mkl runs`


def batch_continue_text(
    waiting: Sequence[tuple[str, Any]], store: str | None, api_base: str | None = None, count: int | None = None
) -> str:
    """After ``mkl map``: how to continue the rows that wait (``waiting`` is (run id, result) pairs of the first
    of them, ``count`` in all) in run store ``store`` (None: the default): each one's commands, or, for many,
    the ``mkl runs`` that lists them all."""
    if not waiting:
        return ""
    count = len(waiting) if count is None else count
    listed = f"`{runs_command(store)}` lists {'each' if count > 1 else 'it'} with the commands that answer it"
    head = f"{count} row{'s' if count != 1 else ''} wait{'s' if count == 1 else ''} for a person: {listed}"
    if count > SHOWN_WAITING:
        return head + "."
    lines = [head + ", or:"]
    for run_id, result in waiting:
        base = resume_command(run_id, store=store, api_base=api_base, started_with=result.started_with)
        lines += [f"  {command}" for command in continue_commands(result, base, result.question_id(run_id))]
    return "\n".join(lines)


def batch_waiting_bundle(waiting: Sequence[tuple[str, Any]], notebook: str | None = None) -> dict[str, str]:
    """What stands where a batch's form is, readable without a kernel: each question that waits, with the
    command that answers it (``waiting`` is (run id, result) pairs): in ``notebook``'s file, else from the
    kernel's store."""
    count = len(waiting)
    where = "(the commands below write the answer into this notebook file)" if notebook else "where its run store is"
    head = (
        f"{count} question{'s' if count != 1 else ''} of this batch wait{'s' if count == 1 else ''} for a person: "
        f"the form is here while the notebook's kernel runs, or answer from a terminal {where}:"
    )
    texts = [_waiting_text(run_id, result, notebook) for run_id, result in waiting]
    return {
        "text/plain": "\n".join([head, *texts]),
        "text/html": f"<p>{escape(head)}</p><pre>{escape(chr(10).join(texts))}</pre>",
    }


def batch_answered_bundle(
    answered: Sequence[tuple[str, Sequence[Mapping[str, Any]]]], head: str = "Answered in this cell's form:"
) -> dict[str, str]:
    """Where a batch's form was, once its questions are answered: what each row's run was told, by whom."""
    lines = [f"{run_id}: {answers_sentence(answers)}" for run_id, answers in answered]
    return {
        "text/plain": "\n".join([head, *lines]),
        "text/html": f"<p>{escape(head)}</p><ul>" + "".join(f"<li>{escape(line)}</li>" for line in lines) + "</ul>",
    }
