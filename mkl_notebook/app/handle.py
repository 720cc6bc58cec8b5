"""A handle on one durable run: read where it stands, answer its question, give it more budget.

A handle belongs to a workspace (:class:`RunHost`: a :class:`~mkl_notebook.app.workspace.Workspace` is one),
which does the work; the handle keeps the outcome it last showed (the run as it stands, or as a notebook cell
left it) and the oracle that answers its calls. It imports no Jupyter: a notebook's handle adds its display on
top.
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol, TypedDict

from ..checkpoints.envelope import checkpoint_of
from ..durable.places import Place
from ..durable.reading import approvers_of_journal
from ..durable.replay import JOURNAL_ENDS
from ..durable.runs import Observer, Outcome
from ..engine.oracle import Oracle
from ..engine.result import RunResult, TraceStep
from ..engine.result import question_id as question_id_of
from ..lang.model import Machine
from ..render.common import answers_sentence
from ..render.views import asked_again
from .continuing import drawn_on
from .copies import Copies
from .equipment import Equipment
from .errors import USER_ERRORS, UsageProblem
from .oracles import makes_calls
from .requests import ContinueRequest, asked
from .status import asked_by, asked_when, cell_answered, with_keys


class RunHost(Protocol):
    """What a handle needs of the workspace it belongs to (a :class:`~mkl_notebook.app.workspace.Workspace`, or a
    notebook's): the handle calls these and nothing else, and the workspace's module is not imported here."""

    machines: dict[str, Machine]
    copies: Copies
    equipment: Equipment

    def read(self, run_id: str, *, trust_file: bool = False) -> Outcome: ...

    def replay_outcome(self, run_id: str, oracle: Oracle, observer: Observer | None = None) -> Outcome: ...

    def continue_run(
        self, run_id: str, oracle: Oracle, request: ContinueRequest | None = None, /, **options: Any
    ) -> Outcome: ...

    def submit(
        self,
        handle: Run,
        reply: Any,
        request: ContinueRequest | None = None,
        /,
        *,
        form_of: str | None = None,
        **options: Any,
    ) -> Run: ...

    def answer(
        self,
        handle: Run,
        reply: Any,
        question: str | None,
        *,
        via: str = "form",
        note: str | None = None,
        observer: Observer | None = None,
        form_of: str | None = None,
    ) -> Run: ...

    def place(self, run_id: str) -> Place | None: ...

    def reached(self, run_id: str, outcome: Outcome) -> None: ...

    def moved(self, handle: Run) -> None: ...

    def output_bundle(self, handle: Run) -> dict[str, Any]: ...


class PendingQuestion(TypedDict):
    """What a run waits for: why, where, the author's ``ask`` (or the model's ``question``), where the reply
    lands, the question's id, what it is about, and answers given before about something that changed since."""

    reason: str | None
    at: str | None
    ask: str | None
    reply_to: str | None
    question: str | None
    question_id: str | None
    about: str | None
    asked_again: list[tuple[str, list[str]]]
    asked_by: str | None  # of a question someone else's copy brought: when it was asked, and who signed it
    approvers: list[str]  # who may answer it (empty: anyone)


class Run:
    """A handle on one durable run of a workspace."""

    def __init__(self, workspace: RunHost, run_id: str, machine_name: str, oracle: Oracle) -> None:
        self.workspace = workspace
        self.id = run_id
        self.machine_name = machine_name
        self.oracle = oracle
        self.outcome: Outcome | None = None
        self.set_aside: str | None = None  # why the notebook's saved copy of this run was not taken up
        # Runs a copy in reach held that this run's next view carries along unchanged: (run id, checkpoint).
        self.carried: list[tuple[str, dict[str, Any]]] = []
        self.drawn_in: int | None = None  # the cell execution whose magic drew this run's view live
        # True while the run moves here because another process answered it (:meth:`catch_up`): no form of this
        # process gave the answer, so what asked the question asks the next one.
        self.answered_elsewhere = False
        self._lock = threading.Lock()

    # -- reading -------------------------------------------------------------------

    @property
    def run_result(self) -> RunResult:
        """Everything the run's engine result holds: status, trace, context, usage, answers, …"""
        if self.outcome is None:
            self.refresh()
        assert self.outcome is not None
        return self.outcome.result

    @property
    def status(self) -> str:
        """``done``, ``suspended`` (waiting for a person, or for more budget), ``halt`` or ``in_doubt``."""
        return self.run_result.status

    @property
    def result(self) -> Any:
        """The run's result value (None until it is done)."""
        return self.run_result.result

    @property
    def error(self) -> str | None:
        """Why the run stopped short of done (a halt's reason, what a suspended run waits for), else None."""
        return self.run_result.error

    @property
    def at(self) -> str | None:
        """The state the run stopped at (None once done)."""
        return self.run_result.at

    @property
    def context(self) -> dict[str, Any]:
        """The run's context as it stands (a copy)."""
        return copy.deepcopy(dict(self.run_result.context))

    @property
    def trace(self) -> list[TraceStep]:
        """The steps of the run, each a plain dict (state, gate, policy, to, tokens, output, …)."""
        return copy.deepcopy(list(self.run_result.trace))

    def trace_frame(self) -> Any:
        """The trace as a pandas DataFrame, one row per step (pandas is optional: ``pip install pandas``)."""
        return pandas_for("Run.trace_frame()").DataFrame(self.trace)

    @property
    def visits(self) -> dict[str, int]:
        """How many times the run entered each state."""
        return dict(self.run_result.visits)

    @property
    def calls(self) -> dict[str, int]:
        """The calls this handle's last advance ``made`` anew and those it ``replayed`` from the journal."""
        return dict(self.outcome.calls) if self.outcome else {"made": 0, "replayed": 0}

    @property
    def pending(self) -> PendingQuestion | None:
        """What the run waits for, or None when it waits for nothing."""
        result = self.run_result
        if result.status != "suspended":
            return None
        return {
            "reason": result.error,
            "at": result.at,
            "ask": result.ask,
            "reply_to": result.reply_to,
            "question": result.question,
            "question_id": result.question_id(self.id),
            "about": result.about,
            "asked_again": asked_again(result),
            "asked_by": asked_by(self.outcome.records) if self.outcome else None,
            "approvers": list(approvers_of_journal(self.outcome.records)) if self.outcome else [],
        }

    @property
    def machine(self) -> Machine | None:
        """The machine the run was started from, as this workspace defines it now."""
        return self.workspace.machines.get(self.machine_name)

    def envelope(self) -> dict[str, Any]:
        """The run's checkpoint as it shows now, sealed by this person's key when it can be read."""
        if self.outcome is None:
            self.refresh()
        assert self.outcome is not None
        return checkpoint_of(self.outcome, self.workspace.equipment.signer())

    def answers_in(self, cell: str | None, *, newest: bool = False) -> list[dict[str, Any]]:
        """The replies notebook cell ``cell``'s forms gave this run, as this handle shows it (``newest``: as the
        run stands, when the handle shows it as a cell left it); each with who, when, how, and its key."""
        if self.outcome is None:
            return []
        return cell_answered(self.outcome, cell, newest=newest)

    @property
    def asked_at(self) -> float | None:
        """When the question the run waits on was asked (its journal's last suspension), if the journal says."""
        return asked_when(self.outcome) if self.outcome is not None else None

    @property
    def journal_length(self) -> int:
        """How many records of the run's journal this handle shows (0 before it has read any)."""
        return self.outcome.length if self.outcome is not None else 0

    @property
    def question_id(self) -> str | None:
        """The id of the question this handle last saw the run wait on (None when it waits for no one)."""
        return self.run_result.question_id(self.id)

    def answer_to(self, question_id: str | None) -> dict[str, Any] | None:
        """A person's answer to question ``question_id`` of this run (who, when, how), if it was answered."""
        setup = self.run_result.setup
        for answer in self.run_result.answers:
            shown = answer.get("question") or ""
            named = {
                question_id_of(self.id, answer["position"], shown, answer.get("about"), pinned)
                for pinned in (setup, None)  # (None: asked before questions named their setup)
            }
            if question_id is not None and question_id in named:
                return answer
        return None

    # -- moving ----------------------------------------------------------------------

    def refresh(self) -> Run:
        """Replay the run from its journal, making the calls it has not made yet (none for a finished run)."""
        return self.advanced(lambda: self.workspace.replay_outcome(self.id, self.oracle))

    def reload(self) -> Run:
        """Read the run as its journal stands now, calling and recording nothing."""
        return self.advanced(lambda: self.workspace.read(self.id))

    def catch_up(self) -> bool:
        """Read the run again when its journal went on past what this handle shows (another process answered
        it): every form and view of it catches up. Whether it had.

        When the process that answered could not make the calls that follow (no model or script there: a
        colleague's server on a hub, a terminal without ``--script``), the run goes on here, where it waits,
        with the calls this handle makes; otherwise nothing is called or recorded. A journal read half way
        through another process's advance (its reply written, not yet what followed) is left until that process
        writes on: what shows the run never draws it cut off."""
        if self.outcome is None or not self.outcome.as_it_stands:
            return False  # not read yet, or shown as a cell left it: a cell's own request moves it
        try:
            now = self.workspace.read(self.id)
        except USER_ERRORS:
            return False  # forgotten since, say: whoever reads it next is told
        if now.length <= self.journal_length or now.result.error == JOURNAL_ENDS:
            # (the second: another process is advancing it, its reply written and not yet what followed; the
            # store's next change, that process's next records, wakes this again)
            return False
        # (a run that waits for a model this kernel has none of is not asked here: it is not this view's to ask;
        # the kernel where it waits goes on with it, and this one reads it again then)
        self.answered_elsewhere = not now.result.waits_for_model or makes_calls(self.oracle)
        try:
            if now.result.waits_for_model and makes_calls(self.oracle):
                going_on = ContinueRequest(via="notebook")
                # (shown once it went on, never first as stopped; another process going on with it meanwhile
                # holds its lease, and it is read again when that one ends)
                with contextlib.suppress(*USER_ERRORS):
                    self.advanced(lambda: self.workspace.continue_run(self.id, self.oracle, going_on))
                    return True
            self.advanced(lambda: now)
            return True
        finally:
            self.answered_elsewhere = False

    def showing(self, outcome: Outcome) -> Run:
        """This handle, showing ``outcome`` (the run as a cell left it)."""
        return self.advanced(lambda: outcome)

    def submit(self, reply: Any, *, question: str | None = None, form_of: str | None = None, **options: Any) -> Run:
        """Journal the person's reply, and let the run go on in the machines it was started with.

        The reply answers ``question`` (by default the one this handle last showed); if the run has
        moved on since, it is refused and nothing is recorded (see :meth:`answer` for a form's late reply).
        ``by`` names who answers; ``note`` is text beside the reply (``submit("approve", note="add an
        apology")``: the reply stays exactly ``approve``; the machine reads the note at ``<reply_to>_note``);
        ``form_of`` is the notebook cell whose form gave the reply; ``via`` and ``observer`` as a
        :class:`~mkl_notebook.app.requests.ContinueRequest` says.
        """
        return self.workspace.submit(self, reply, question=question or self.question_id, form_of=form_of, **options)

    def answer(
        self,
        reply: Any,
        question: str | None,
        *,
        via: str = "form",
        note: str | None = None,
        form_of: str | None = None,
        observer: Observer | None = None,
    ) -> Run:
        """A reply from a form or a queue's row that showed ``question``, journaled through the workspace (a late
        one is :class:`~mkl_notebook.app.errors.Superseded`, saying what became of the question); ``observer``
        is told of the run's progress as it goes on."""
        return self.workspace.answer(self, reply, question, via=via, note=note, observer=observer, form_of=form_of)

    def resume(self, request: ContinueRequest | None = None, /, **options: Any) -> Run:
        """Continue a suspended run (with a reply and its ``note``, new budgets, or neither) or settle an
        in-doubt tool call, as the :class:`~mkl_notebook.app.requests.ContinueRequest` says (``options``: its
        fields, as keywords).

        Machines redefined in the workspace since the run started take over (the edit-and-rerun path).
        """
        asks = asked(ContinueRequest, request, {"via": "notebook", **options} if request is None else options)
        asks = replace(asks, place=self.workspace.place(self.id))
        return self.advanced(lambda: self.workspace.continue_run(self.id, self.oracle, asks), request=True)

    def advanced(self, step: Callable[[], Outcome], *, request: bool = False) -> Run:
        """Take the outcome of ``step``; a ``request`` of the executing cell moves that cell's place on."""
        with self._lock:
            self.outcome = step()
        if (
            self.id in self.workspace.copies.taken_up
        ):  # another person's run, not trusted: the commands name none of its paths
            self.outcome.result.started_with = drawn_on(self.outcome.records, trusted=False)
        if not self.machine_name:
            self.machine_name = self.outcome.root
        if request:
            self.workspace.reached(self.id, self.outcome)
        if self.outcome.latest is None:
            self.workspace.moved(self)  # shown as it stands: every form and view of it catches up
        return self

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        if self.outcome is None:
            self.refresh()
        return self.workspace.output_bundle(self)

    def __repr__(self) -> str:
        if self.outcome is None:
            return f"<Run {self.id}>"
        result = self.outcome.result
        where = f" at {result.at}" if result.at else ""
        error = f" ({result.error})" if result.error else ""
        return f"<Run {self.id} of {self.machine_name}: {result.status}{error}{where}>"


def pandas_for(what: str) -> Any:
    """pandas, which ``what`` needs; it is optional, never a dependency of the package."""
    try:
        return importlib.import_module("pandas")
    except ImportError:
        raise UsageProblem(f"{what} needs pandas, which is not installed: pip install pandas") from None


def what_happened(run: Run, question_id: str | None) -> str:
    """What became of a question the run no longer waits on: who answered it, or where the run went."""
    answer = run.answer_to(question_id)
    if answer is not None:
        return answers_sentence(with_keys([answer], run.outcome.records if run.outcome is not None else None))
    pending = run.pending
    if pending is not None and pending.get("question_id"):
        return f"No longer asked: the run now waits on {pending.get('ask') or pending.get('question')!r}."
    return f"No longer asked: the run is {run.status}{f' ({run.error})' if run.error else ''}."
