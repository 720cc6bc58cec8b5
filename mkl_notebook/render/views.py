"""The names that lived here before the views were split by job; kept for one release, then removed.

Import from the modules that own them now:

- :mod:`.common`: escaping, the caps on long lists and the phrases many views share — ``Step``,
  ``PREVIEW``, ``NONE``, ``WHOLE_ROWS``, ``FIRST_ROWS``, ``LAST_ROWS``, ``Cap``, ``cut``, ``notebook_cap``,
  ``columns``, ``money``, ``answer_time``, ``answered_by``, ``answers_sentence``, ``status_phrase``.
- :mod:`.trace`: the trace table and the answers between its steps — ``trace_table_html``,
  ``trace_table_text``, ``traced_answers``, ``ASKED_AGAIN``, ``BRANCH_PREVIEW``, ``GATE_MAX``.
- :mod:`.visits`: the visits table — ``visits_table_html``, ``visits_table_text``, ``highlighted_state``,
  ``UNBOUNDED``, ``VISITS_ROWS``.
- :mod:`.questions`: what a stopped run asks, and answers asked again — ``asked_again``, ``changed``,
  ``DIFF_LINES``.
- :mod:`.summary`: the outcome of a run — ``result_summary_html``, ``result_summary_text``,
  ``RESULT_INLINE``, ``RESULT_MAX``.
- :mod:`.live`: the live line — ``Live``, ``progress_html``, ``progress_text``, ``progress_bundle``,
  ``LIVE_TAIL``.
- :mod:`.cards`: what stands where a run waits — ``pending_card_html``, ``pending_card_text``,
  ``waiting_html``, ``waiting_text``, ``untrusted_bundle``, ``answered_bundle``.
- :mod:`.commands`: every ``mkl`` command a person is shown — ``continue_commands``, ``UNKNOWN_NOTEBOOK``.
- :mod:`.listings`: runs, waiting questions, scenarios and the standard library — ``RunRow``,
  ``spent_cell``, ``runs_table_html``, ``runs_table_text``, ``runs_bundle``, ``asked_as_listed``,
  ``questions_table_html``, ``questions_table_text``, ``questions_bundle``, ``ScenarioOutcome``,
  ``scenario_table_html``, ``scenario_table_text``, ``library_html``, ``library_text``.
- :mod:`.run_view`: a run's view in a cell — ``run_html``, ``run_text``, ``run_bundle``, ``Shown``,
  ``Later``, ``BUDGET_HALTS``, ``UNDEFINED_MACHINE``.
"""

from __future__ import annotations

from .cards import (
    UNDEFINED_MACHINE,
    answered_bundle,
    pending_card_html,
    pending_card_text,
    untrusted_bundle,
    waiting_html,
    waiting_text,
)
from .commands import UNKNOWN_NOTEBOOK, continue_commands, trust_key_command
from .common import (
    FIRST_ROWS,
    LAST_ROWS,
    NONE,
    PREVIEW,
    WHOLE_ROWS,
    Cap,
    Step,
    answer_time,
    answered_by,
    answers_sentence,
    columns,
    cut,
    money,
    notebook_cap,
    status_phrase,
)
from .listings import (
    RunRow,
    ScenarioOutcome,
    asked_as_listed,
    library_html,
    library_text,
    questions_bundle,
    questions_table_html,
    questions_table_text,
    runs_bundle,
    runs_table_html,
    runs_table_text,
    scenario_table_html,
    scenario_table_text,
    spent_cell,
)
from .live import LIVE_TAIL, Live, progress_bundle, progress_html, progress_text
from .questions import ABOUT_LABEL, DIFF_LINES, asked_again, changed
from .run_view import BUDGET_HALTS, Later, Shown, run_bundle, run_html, run_text
from .summary import RESULT_INLINE, RESULT_MAX, result_summary_html, result_summary_text
from .trace import ASKED_AGAIN, BRANCH_PREVIEW, GATE_MAX, trace_table_html, trace_table_text, traced_answers
from .visits import UNBOUNDED, VISITS_ROWS, highlighted_state, visits_table_html, visits_table_text

__all__ = [
    "ABOUT_LABEL",
    "ASKED_AGAIN",
    "BRANCH_PREVIEW",
    "BUDGET_HALTS",
    "DIFF_LINES",
    "FIRST_ROWS",
    "GATE_MAX",
    "LAST_ROWS",
    "LIVE_TAIL",
    "NONE",
    "PREVIEW",
    "RESULT_INLINE",
    "RESULT_MAX",
    "UNBOUNDED",
    "UNDEFINED_MACHINE",
    "UNKNOWN_NOTEBOOK",
    "VISITS_ROWS",
    "WHOLE_ROWS",
    "Cap",
    "Later",
    "Live",
    "RunRow",
    "ScenarioOutcome",
    "Shown",
    "Step",
    "answer_time",
    "answered_bundle",
    "answered_by",
    "answers_sentence",
    "asked_again",
    "asked_as_listed",
    "changed",
    "columns",
    "continue_commands",
    "cut",
    "highlighted_state",
    "library_html",
    "library_text",
    "money",
    "notebook_cap",
    "pending_card_html",
    "pending_card_text",
    "progress_bundle",
    "progress_html",
    "progress_text",
    "questions_bundle",
    "questions_table_html",
    "questions_table_text",
    "result_summary_html",
    "result_summary_text",
    "run_bundle",
    "run_html",
    "run_text",
    "runs_bundle",
    "runs_table_html",
    "runs_table_text",
    "scenario_table_html",
    "scenario_table_text",
    "spent_cell",
    "status_phrase",
    "trace_table_html",
    "trace_table_text",
    "traced_answers",
    "trust_key_command",
    "untrusted_bundle",
    "visits_table_html",
    "visits_table_text",
    "waiting_html",
    "waiting_text",
]
