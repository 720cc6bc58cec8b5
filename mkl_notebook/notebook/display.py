"""A run's outputs in a cell: its question and form first, then its checkpoint-carrying view, then its diagram.

Each run owns ONE display output whose bundle carries the checkpoint envelope
(``application/vnd.mkl.run+json``) beside HTML and text; it is updated in place
with display handles as the run advances, so the saved notebook always holds
the checkpoint of what the cell shows. With the JupyterLab extension the
notebook's metadata holds that checkpoint and the output refers to it
(``metadata_link``). Above it, the question's place prints the question a
person's answer is awaited on, with the commands that answer it, as plain
HTML and text (so it reads in an HTML or PDF export, on a Git host, without a
kernel), and says what was answered once it is; right below it, the form's
place holds the widget with the controls. A click changes that widget in
place (reply, next question, result), so a frontend that draws outputs once
and then only follows widgets (Voila) redraws as JupyterLab does; the outputs
are updated by their display ids too, so the saved file says where the run is.
"""

from __future__ import annotations

import functools
import html
import re
import threading
import time
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets
from IPython import get_ipython
from IPython.display import DisplayHandle, display

from ..app.checkpoints import CHECKPOINT_MIME, WIDGET_MIME, referring
from ..app.handle import Run, what_happened
from ..app.status import answered_place, cell_answered, form_place, run_diagram, run_output
from ..app.terms import Machine, Outcome, Signer
from ..app.trust import Untrusted
from ..render import views
from ..render.commands import UNKNOWN_NOTEBOOK, continue_commands, resume_command
from ..render.questions import Asked, question_place
from ..render.views import Live, progress_bundle
from .forms import FORM_CLASS, QuestionForm, TakeUpChoice, close_widgets, made
from .metadata_link import MetadataLink
from .redraws import RestOfRedraw, streams_flushed_once
from .session import KernelNotebook

LIVE_INTERVAL = 0.15  # seconds between live progress redraws
BRANCH_TAIL = 60  # characters of a branch's answer-in-progress its line shows
# What a notebook without the extension shows where it keeps another history of a run its file held (the file's
# run set aside for this person's own, or a history that parted): what it is, and why it is there.
KEPT_NOTE = (
    "(run '{run_id}' as this notebook's file held it before: kept unchanged here, so that the saved file still "
    "carries it; `%mkl pending` and `mkl runs` list it)"
)
_BRANCH = re.compile(r"/branch:(\d+)/")


class RunView:
    """The outputs of one run in the cell that started it (or re-showed it), top to bottom:

    - the *question's place*: the live line while the run works; then, while it waits for a
      person, the question and the commands that answer it (plain HTML and text); once answered,
      what was answered, by whom and when;
    - the *form's place*: the widget with the form's controls (and, once a click moved the run on,
      what became of the question, the run's next question or its result);
    - the run's view (outcome, trace, visits), carrying its checkpoint;
    - its diagram.
    """

    def __init__(
        self,
        run_id: str,
        machine: Machine | None,
        cell: str | None = None,
        notebook: str | None = None,
        signer: Signer | None = None,
        kernel: KernelNotebook | None = None,
        unattended: str | None = None,
        mirrored: bool = False,
    ) -> None:
        self.run_id = run_id
        self.kernel = kernel  # the notebook the kernel runs: it tells this view whenever the run moves
        self.unattended = unattended  # the headless client executing the notebook (no form then), if it is one
        # Voila draws a cell's outputs once and then follows only widgets: every place of the view is one then.
        self.mirrored = mirrored
        # The notebook's metadata: each checkpoint of the run as it stands goes there too.
        self.link: MetadataLink | None = kernel.link if kernel is not None else None
        self.signer = signer  # seals the checkpoint the view carries
        self.note: str | None = None  # said above the run: that the notebook's saved copy was set aside
        self.machine = machine
        self.cell = cell  # the notebook cell showing it: its forms' replies belong to it
        self.notebook = notebook  # the file's name, for the commands that continue the run
        self.top: ViewPlace | None = None
        self.form_out: Placed | None = None  # the form's place, right below the question's
        self.box: widgets.VBox | None = None  # the widget standing there: the form, or what became of it
        self._leaving: list[widgets.Widget] = []  # widgets that left the box, closed once the view is drawn
        self.handle: ViewPlace | None = None
        self.current_form: Any = None
        self.place = _place(cell, run_id)  # the form's widgets' model ids derive from it
        self.diagram: ViewPlace | None = None
        self._kept: dict[str, Placed] = {}  # outputs keeping a run a copy held, by the run's id
        self.shown: Outcome | None = None
        self._asked: str | None = None  # the question whose form this view shows
        self._question_above = False  # whether the view was drawn with the question left to the form
        self._following = False
        self._last_draw = 0.0
        self._started = time.monotonic()
        self._state: str | None = None  # the state the run last entered, for the live line and an interrupt
        self._steps = 0
        self._usage: dict[str, int] = {}
        self._cost: float | None = None
        self._writing: str | None = None  # the answer arriving now (not in a fan-out branch), so far
        self._writer: str | None = None  # the state writing it (a called machine's, perhaps)
        self._judging = False
        self._branches: dict[int, str] = {}  # a fan-out's branches: what each one is doing
        self._branch_count = 0
        self._live_lock = threading.Lock()  # branches report from their own threads
        self._main = threading.main_thread()
        self._drawing = threading.RLock()  # a redraw, and the rest of one drawn later (see RestOfRedraw)
        self._rest = RestOfRedraw(self._drawing)

    # -- live progress ------------------------------------------------------------

    def start(self) -> None:
        self._started = time.monotonic()
        self.top = self._shown("top", progress_bundle(None, 0, {}, 0.0))

    def stop(self, line: str) -> None:
        """The run stopped without a result to show (an interrupt, an error): one line instead of the live one."""
        if self.top is not None:
            self.top.update({"text/plain": line, "text/html": f"<p>{html.escape(line)}</p>"}, raw=True)

    @property
    def last_state(self) -> str | None:
        return self._state

    @property
    def last_steps(self) -> int:
        return self._steps

    def observer(self, event: str, data: dict[str, Any]) -> None:
        """Engine progress events: note them (branches report from their own threads), and redraw the live
        line now and then from the run's own thread only, so it is drawn in the cell that shows the run."""
        with self._live_lock:
            self._note(event, data)
        if threading.current_thread() is not self._main:
            return
        now = time.monotonic()
        if now - self._last_draw < LIVE_INTERVAL:
            return
        self._last_draw = now
        if self.top is not None and self.shown is None:
            with self._live_lock:
                live = Live(self._writing, self._judging, self._branch_lines(), self._cost)
                state = self._writer if self._writing is not None or self._judging else self._state
                bundle = progress_bundle(state, self._steps, self._usage, now - self._started, live)
            self.top.update(bundle, raw=True)

    def _note(self, event: str, data: dict[str, Any]) -> None:
        """What an event changes on the live line (the lock is held)."""
        if event in ("enter", "step") and not data.get("depth"):
            self._steps, self._usage = int(data.get("steps") or 0), dict(data.get("usage") or {})
            self._cost = data.get("cost_usd")
            self._writing, self._judging = None, False
            if event == "enter":
                self._state = data.get("state")
                self._branches, self._branch_count = {}, 0
        elif event == "partial":
            judging = data.get("kind") == "judge"
            branch = _BRANCH.search(str(data.get("position") or ""))
            if branch is not None:
                text = str(data.get("text") or "")
                tail = text[-BRANCH_TAIL:].replace("\n", " ")
                self._branches[int(branch.group(1))] = "judging …" if judging else f"writing … {tail}".rstrip()
            else:
                self._writer, self._judging = data.get("state"), judging
                self._writing = None if judging else str(data.get("text") or "")
        elif event == "branch":
            self._branch_count = int(data.get("count") or 0)
            self._branches[int(data.get("index") or 0)] = "failed" if data.get("failed") else "done"
        elif event == "waiting":
            self._branch_count = int(data.get("count") or 0)

    def _branch_lines(self) -> tuple[str, ...]:
        """One line per fan-out branch while a fan-out runs (the lock is held); of a wide fan-out, a line
        per branch at work (capped like every list of a view) and one that counts the others."""
        count = self._branch_count
        if not count:
            return ()
        if count <= views.WHOLE_ROWS:
            return tuple(f"branch {index + 1}: {self._branches.get(index, 'waiting')}" for index in range(count))
        working = sorted(i for i, doing in self._branches.items() if doing not in ("done", "failed") and i < count)
        first, last = views.cut(len(working))
        lines = [f"branch {working[i] + 1}: {self._branches[working[i]]}" for i in (*first, *last)]
        done = sum(1 for doing in self._branches.values() if doing == "done")
        failed = sum(1 for doing in self._branches.values() if doing == "failed")
        waiting = count - len(self._branches)
        at_work = f"{len(working):,} at work" + (f" ({len(working) - len(lines):,} not listed)" if last else "")
        tally = [at_work, f"{done:,} done", *([f"{failed:,} failed"] if failed else []), f"{waiting:,} waiting"]
        return (*lines, f"of {count:,} branches: {', '.join(tally)}")

    # -- a run the notebook carries but this person does not trust --------------------------

    def untrusted(self, problem: Untrusted, choices: list[tuple[str, Callable[[str], None]]]) -> None:
        """Show whose the file's run is, how the file shows it and what it adds, with buttons that trust its
        signer, take it up, or make a run of this cell's own beside it; nothing of it runs until one is clicked.
        The outputs the run will fill are kept, and one carries the file's copy along as it was."""
        found = problem.found
        ask = found.shown if found is not None and found.waits_for_reply else None
        where = "in an unknown state" if found is None else views.status_phrase(found.status, found.error, found.at)
        provenance = problem.provenance
        banner = views.untrusted_bundle(
            problem.run_id,
            problem.source,
            provenance.mark,
            where,
            ask,
            added=problem.added,
            trust=problem.trust,
            refused=provenance.refused,
        )
        if problem.checkpoint is not None:  # the outputs this replaces may have held the file's only copy
            self._carry(problem.run_id, problem.checkpoint)
        choice = TakeUpChoice(banner, choices, place=self.place, name=provenance.name)
        self.choice: TakeUpChoice | None = choice
        self.current_form = None
        bundle = {**choice.widget._repr_mimebundle_(), **banner}
        if self.top is None:
            self.top = self._shown("top", bundle)
        else:
            self.top.update(bundle, raw=True)
        # A click runs in the widget's message, not in this cell: the outputs it will fill must exist now.
        if self.form_out is None:
            self.form_out = self._placed("form", {"text/plain": ""})
        if self.handle is None:
            self.handle = self._shown("view", {"text/plain": ""})
        if self.diagram is None:
            self.diagram = self._shown("diagram", {"text/plain": ""})

    # -- final state ------------------------------------------------------------------

    def show(self, run: Run) -> None:
        """Draw the run as its handle shows it, with its form when it waits for a person; from now on the view
        follows the run, and draws it again whenever it moves (by its own form's reply, or by any other path)."""
        with self._drawing, streams_flushed_once():
            self._rest.void()
            self._show(run)

    def _show(self, run: Run) -> None:
        machine = run.machine or self.machine
        self.machine = machine
        result = run.run_result
        outcome = run.outcome
        assert outcome is not None  # reading run_result made sure of it
        self.shown = outcome
        asking = result.waits_for_person and outcome.as_it_stands
        form_place_now: dict[str, Any] | None
        if asking:
            top, form_place_now = self._asking(run, outcome)
        else:
            top = self._top_bundle(run, outcome)
            form_place_now = self._asked_no_more(run, outcome, top)
        if self.top is None:
            self.top = self._shown("top", top)
        else:
            self.top.update(top, raw=True)
        if form_place_now is not None and self.form_out is None:
            self.form_out = self._placed("form", form_place_now)
            form_place_now = None
        if run.set_aside:  # said once, by the view of the cell that made the run anew
            self.note, run.set_aside = run.set_aside, None
        carried, run.carried = run.carried, []
        for carried_id, checkpoint in carried:
            self._carry(carried_id, checkpoint)
        kept = self._kept.pop(run.id, None)
        if kept is not None:  # the run the file held, taken up since: its view below carries it now
            kept.update({"text/plain": ""}, raw=True)
        if not self._following and self.kernel is not None:
            self._following = True
            self.kernel.follow(run.id, self._went_on)
        rest = functools.partial(self._draw_rest, run.id, outcome, machine, asking, form_place_now)
        if self.handle is None or not self._rest.schedule(rest):
            rest()

    def _draw_rest(
        self, run_id: str, outcome: Outcome, machine: Machine | None, asking: bool, form_place: dict[str, Any] | None
    ) -> None:
        """The places of a redraw nobody waits for: the run's view and diagram, the form's place (its printed twin,
        for the file and for pages that follow outputs: the page shows the new question as soon as the box holds
        it, and a redrawn place draws the box anew), and the closing of the widgets that left the box (each is a
        message to every page, which would draw the new question after them)."""
        self._draw_view(run_id, outcome, question_above=asking)
        if machine is not None:
            diagram = run_diagram(machine, outcome)
            if self.diagram is None:
                self.diagram = self._shown("diagram", diagram)
            else:
                self.diagram.update(diagram, raw=True)
        if form_place is not None and self.form_out is not None:
            self.form_out.update(form_place, raw=True)
        leaving, self._leaving = self._leaving, []
        close_widgets(leaving)

    def _carry(self, run_id: str, checkpoint: dict[str, Any]) -> None:
        """An output that keeps another run a copy in reach held (the file's run set aside, a history that
        parted), unchanged, so that the saved notebook still carries it where no extension writes metadata."""
        bundle = {CHECKPOINT_MIME: checkpoint, "text/plain": KEPT_NOTE.format(run_id=run_id)}
        link = self.link
        if link is not None and link.linked and link.held(run_id) is not None:
            bundle = referring(bundle)  # the metadata keeps it
        kept = self._placed(f"kept:{run_id}", bundle)
        self._kept[run_id] = kept
        if link is not None and not link.linked:

            def refer() -> None:  # once the page says its metadata keeps it, the output refers to that copy
                if link.held(run_id) == checkpoint:
                    kept.update(referring(bundle), raw=True)

            link.when_linked(refer)

    def _draw_view(self, run_id: str, outcome: Outcome, *, question_above: bool) -> None:
        bundle = run_output(
            run_id,
            self.machine,
            outcome,
            notebook=self.notebook,
            question_above=question_above,
            signer=self.signer,
            note=self.note,
        )
        if self.link is not None:  # the run as it stands goes to the metadata, not a cell's part of it
            bundle = self.link.carry(run_id, bundle, as_it_stands=outcome.as_it_stands)
        if self.handle is None:
            self.handle = self._shown("view", bundle)
            if self.link is not None:
                self.link.when_linked(self._redraw_view)
        else:
            self.handle.update(bundle, raw=True)
        self._question_above = question_above

    def _redraw_view(self) -> None:
        """Draw the view again as it stands now: when the extension answers, the checkpoint leaves it."""
        if self.shown is not None:  # (the run shown: this cell's own run, when the file's was set aside)
            self._draw_view(self.shown.run_id, self.shown, question_above=self._question_above)

    def _top_bundle(self, run: Run, outcome: Outcome) -> dict[str, Any]:
        """The question's place when no form of this view asks: what this cell's forms answered, if anything."""
        self._asked = None
        if not outcome.as_it_stands and outcome.result.waits_for_person:
            return self._settled(outcome, outcome.result.question_id(run.id), newest=True)
        if cell_answered(outcome, self.cell):
            return self._settled(outcome, None)
        return {"text/plain": ""}

    def _settled(self, outcome: Outcome, asked: str | None, *, newest: bool = False) -> dict[str, Any]:
        """The question's place once no question waits there (see :func:`answered_place`)."""
        return answered_place(outcome, self.cell, asked, newest=newest)

    def _asking(self, run: Run, outcome: Outcome) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """The question's place and the form's while the run waits for a person: the question printed, the
        controls below it; once a click of this view's form moved the run on to another question, what became
        of the last one, and the new question in the form (its printed twin beside the widget)."""
        previous, previous_asked = self.current_form, self._asked
        pending = {**(run.pending or {}), "taken_up": run.workspace.copies.taken_up.get(run.id)}
        if self.unattended is not None:
            # Nobody can click here: the question and its commands are printed, and no form goes into the file
            # the client saves, where its widgets would be dead controls (a run of the cell in Jupyter draws one).
            asked = pending.get("question_id")
            self.current_form, self._asked = None, asked if isinstance(asked, str) else None
            return self._printed(run, outcome, pending, self._asked), None  # and no empty place for a form
        asked = pending.get("question_id")
        printed = self._printed(run, outcome, pending, asked)
        if previous is None:
            form = self._form(run, pending)  # the question is printed above it
            box = self._box([form.widget])
            return printed, {**box._repr_mimebundle_(), "text/plain": ""}
        # The new question with the commands that answer it, in the form's header: a page that cannot follow the
        # outputs' updates (reloaded, another person's) follows widgets, and the output's own twin is drawn only
        # without one.
        form = self._form(run, pending, printed=printed["text/html"])
        # The place above says what became of the last question wherever outputs are redrawn (a page whose
        # extension answered: JupyterLab, Notebook 7); elsewhere (Voila) only widgets move, so the box says it.
        redrawn = self.mirrored or (self.link is not None and self.link.linked)
        became = [] if redrawn else [self._what_became(run, previous_asked)]
        box = self._box([*became, form.widget])
        if previous.place != form.place:
            self._leaving += previous.parts()
        return self._settled(outcome, previous_asked), {**box._repr_mimebundle_(), **printed}

    def _printed(self, run: Run, outcome: Outcome, pending: dict[str, Any], asked: Any) -> dict[str, Any]:
        """The question's printed place: the question, what it is about, and the commands that answer it."""
        result = outcome.result
        base = resume_command(run.id, notebook=self.notebook or UNKNOWN_NOTEBOOK, started_with=result.started_with)
        return {
            **form_place(run.id, outcome, notebook=self.notebook),  # its mark, for a headless resume to rewrite
            **question_place(Asked.of(run.id, pending), continue_commands(result, base, asked)),
        }

    def _asked_no_more(self, run: Run, outcome: Outcome, top: dict[str, Any]) -> dict[str, Any] | None:
        """The form's place when no question waits there: what became of the form's question and the run's
        result in the widget (for a frontend that only follows widgets), and nothing in the output (the
        question's place says what was answered). None: leave it as it is."""
        if self.current_form is not None and self.mirrored:  # the places above say what became of it
            self._box([])
            self.current_form.close()
            self.current_form = None
            return {"text/plain": ""}
        if self.current_form is not None:
            result = outcome.result
            done = views.result_summary_html(result, None, views.notebook_cap(run.id))
            said = made(widgets.HTML, f"{self.place}/result", self.place, value=done)
            self._box([self._what_became(run, self._asked), said])
            self.current_form.close()
            self.current_form = None
            return {"text/plain": ""}
        if self.form_out is None and top.get("text/plain") and self.unattended is None:
            return {"text/plain": ""}  # as the cell read when its form was answered in it
        return None

    def _shown(self, name: str, bundle: dict[str, Any]) -> ViewPlace:
        """Show ``bundle`` in a place of this view (``name``: top, view, diagram) that later updates redraw."""
        if self.mirrored:
            return Mirrored(f"{self.place}/{name}", bundle)
        return self._placed(name, bundle)

    def _placed(self, name: str, bundle: dict[str, Any]) -> Placed:
        """Show ``bundle`` as a display output of this view (``name``: its place) that later updates redraw."""
        return Placed(f"{self.place}/{name}", bundle, None if self.unattended is not None else self.link)

    def _box(self, children: list[widgets.Widget]) -> widgets.VBox:
        """The widget in the form's place, holding ``children`` now (made with them: no update to send). Its
        layout, and those of the forms it holds, are the view's own, made once. What leaves the box is closed."""
        if self.box is None:
            self.box = made(widgets.VBox, f"{self.place}/box", self.place, children=children, _dom_classes=[FORM_CLASS])
            return self.box
        gone = [child for child in self.box.children if all(child is not kept for kept in children)]
        self.box.children = children
        self._leaving += gone  # (what said the last question, and its form: no page shows them again)
        return self.box

    def _what_became(self, run: Run, asked: str | None) -> widgets.HTML:
        said = html.escape(what_happened(run, asked))
        return made(widgets.HTML, f"{self.place}/{asked}/became", self.place, value=f"<p><em>{said}</em></p>")

    def _form(self, run: Run, pending: dict[str, Any], *, printed: str | None = None) -> QuestionForm:
        """The form of the question ``pending``, printed beside it, or in its header when ``printed`` is given."""
        place = f"{self.place}/{pending.get('question_id')}"
        form = QuestionForm(
            run,
            pending,
            cell=self.cell,
            observer=self.observer,
            place=place,
            beside=True,
            scope=self.place,
            printed=printed,
        )
        self.current_form, self._asked = form, form.question_id
        return form

    def _went_on(self, run: Run) -> bool:
        """The notebook's word that the run moved. By this view's own form's reply, or by another process's
        answer to the question this view's form asks (a colleague's server, a terminal: no form here answered
        it): the view draws the run as it stands (its next question, or its result). By another path of this
        kernel (a cell, another form): it says so here, and settles the form, as the path that moved it draws it
        on. True once the run is over (nothing more to follow)."""
        if self.shown is None or run.outcome is None:
            return False
        if run.outcome.length <= self.shown.length:
            return False  # nothing new beyond what this view shows
        with self._drawing, streams_flushed_once():
            self._rest.void()
            return self._caught_up(run, self.shown, run.outcome)

    def _caught_up(self, run: Run, shown: Outcome, now: Outcome) -> bool:
        form, asked = self.current_form, self._asked
        if form is not None and not form.settled and (form.sent or run.answered_elsewhere):
            self.show(run)  # what the run asks now, or what became of it
            return run.status in ("done", "halt")
        self.shown = shown.overtaken(now)
        self._draw_view(run.id, self.shown, question_above=False)
        if self.top is not None and (asked or form is not None):
            self.top.update(self._settled(self.shown, asked, newest=True), raw=True)
        if form is not None:
            form.settle(what_happened(run, asked))
            self.current_form, self._asked = None, None
            if self.form_out is not None:
                self.form_out.update({"text/plain": ""}, raw=True)  # the widget stays, settled, where only it is seen
        return run.status in ("done", "halt")


BLANK: dict[str, Any] = {"text/plain": ""}  # an output that shows nothing


class Placed:
    """A place of a view drawn as a display output. The page that ran the cell redraws it by its display id; a page
    that shows the notebook's outputs but did not draw them (reloaded, a second page) knows no display id, so the
    output also carries its place (``metadata.mkl.place``) and each redraw goes to such pages through the
    notebook's link too, where the extension redraws the output that stands in that place. (Shared in real time,
    every person's page follows the shared notebook, which the page that ran the cell writes.)"""

    def __init__(self, key: str, bundle: dict[str, Any], link: MetadataLink | None) -> None:
        self.key, self.link = key, link
        self.metadata = {"mkl": {"place": key}}
        self.handle: DisplayHandle = display(bundle, raw=True, display_id=True, metadata=self.metadata)
        self.widget_shown = WIDGET_MIME in bundle
        if link is not None:
            link.drawn(key, bundle, self.metadata)

    @property
    def display_id(self) -> str:
        return str(self.handle.display_id)

    def update(self, bundle: dict[str, Any], raw: bool = True) -> None:
        """Redraw the place. A widget redrawn over a widget is blanked first: JupyterLab hands the new output to
        the renderer that drew the last one, and ipywidgets' renderer then adds a view of the widget and keeps
        the old ones alive, each following its model, so every click of a long run redrew all the forms before
        it. A blank output ends that renderer, and with it its views."""
        if self.widget_shown and WIDGET_MIME in bundle:
            self._draw(BLANK)
        self._draw(bundle)
        self.widget_shown = WIDGET_MIME in bundle

    def _draw(self, bundle: dict[str, Any]) -> None:
        self.handle.update(bundle, raw=True, metadata=self.metadata)
        if self.link is not None:
            self.link.draw(self.key, bundle, self.metadata)


class Mirrored:
    """A place of a view drawn as a widget (in Voila, which draws outputs once and then follows only widgets):
    an HTML widget whose value follows each update, as a display handle's output would."""

    def __init__(self, key: str, bundle: dict[str, Any]) -> None:
        self.widget = made(widgets.HTML, key, value=as_html(bundle))
        display(self.widget)

    def update(self, bundle: dict[str, Any], raw: bool = True) -> None:
        self.widget.value = as_html(bundle)


ViewPlace = Placed | Mirrored


def as_html(bundle: dict[str, Any]) -> str:
    """What a view's output shows, as HTML: its HTML, else its drawing (our SVG), else its text, escaped."""

    def joined(value: Any) -> str:
        return "".join(value) if isinstance(value, list) else str(value)

    if "text/html" in bundle:
        return joined(bundle["text/html"])
    if "image/svg+xml" in bundle:
        return joined(bundle["image/svg+xml"])
    text = joined(bundle.get("text/plain", ""))
    return f"<pre>{html.escape(text)}</pre>" if text else ""


def _place(cell: str | None, run_id: str) -> str:
    """Where a run's view stands, as its widgets' model ids say it: the notebook cell (or, where the client
    names none, the execution's number, alike in every Run All) and the run."""
    if cell:
        return f"cell:{cell}/run:{run_id}"
    shell = get_ipython()
    return f"execution:{getattr(shell, 'execution_count', 0)}/run:{run_id}"
