"""``%%mkl`` and ``%mkl …``: each subcommand parses its line, makes one call to the kernel's workspace, and draws
what comes back (a run's view and its form, a table, a diagram).

User mistakes raise IPython's own ``UsageError`` (one line, no traceback).
"""

from __future__ import annotations

import argparse
import html
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class, no_var_expand
from IPython.display import display
from traitlets import Unicode, observe

from ..app.channel_places import shown_beside
from ..app.checkpoints import batch_place
from ..app.errors import USER_ERRORS, without_secrets
from ..app.handle import Run
from ..app.listing import waiting_questions
from ..app.requests import ContinueRequest, MapRequest, StartRequest, from_flags
from ..app.terms import Machine
from ..app.trust import Untrusted, key_fingerprint
from ..app.workspace import Workspace
from ..render import views
from ..render.batch_views import batch_answered_bundle
from ..render.diagram import diagram_bundle
from .batch import Batch, run_batch
from .display import RunView
from .magic_args import HELP, SUBCOMMANDS, HelpShown, Values, parsers, split_words
from .reading_magics import ReadingCommands
from .review import ReviewQueue
from .session import KernelNotebook, current_session, notebook_of, served_by_voila


@contextmanager
def _running(view: RunView) -> Iterator[None]:
    """While a run advances in a cell: an interrupt ends in one line naming where and how to go on, and
    neither it nor an error leaves the live "running" line behind.

    That line is the cell's error (so that Run All stops there), said once: the live line is cleared, not
    replaced by a copy of it.
    """
    try:
        yield
    except KeyboardInterrupt:
        where = f" at state '{view.last_state}'" if view.last_state else ""
        line = (
            f"run '{view.run_id}' was interrupted{where} after {view.last_steps} step(s); every answer so far "
            "is journaled: run this cell again to continue from there"
        )
        view.stop("")
        raise UsageError(line) from None
    except BaseException:
        view.stop("")  # the error itself shows below
        raise


@magics_class
class MklMagics(ReadingCommands, Magics):
    """Also configurable: ``%config MklMagics.model = "openai/gpt-4o-mini"`` (and judge_model, api_base)."""

    model = Unicode(None, allow_none=True, help="litellm model for every tier").tag(config=True)
    judge_model = Unicode(None, allow_none=True, help="litellm model for judge calls").tag(config=True)
    api_base = Unicode(None, allow_none=True, help="base URL of an OpenAI-compatible server").tag(config=True)

    def __init__(self, shell: Any, session: Workspace) -> None:
        self.session = session
        self.notebook: KernelNotebook = notebook_of(session)  # its cells: where requests come from, what shows runs
        super().__init__(shell)
        self.parsers = parsers()
        self.values = Values(lambda: self.shell.user_ns if self.shell is not None else {})

    @observe("model", "judge_model", "api_base")
    def _model_setting(self, change: Any) -> None:
        key = {"model": "model", "judge_model": "judge", "api_base": "api_base"}[change["name"]]
        if change["new"]:
            self.session.settings.models[key] = change["new"]
        else:
            self.session.settings.models.pop(key, None)

    # -- the magic -------------------------------------------------------------------------

    @no_var_expand
    @line_cell_magic
    def mkl(self, line: str, cell: str | None = None) -> Run | Batch | None:
        """mkl machines in notebooks: %%mkl to define, %mkl run/resume/… to run (see %mkl help).

        ``%mkl run`` and ``%mkl resume`` give the run (``r = %mkl run …``); a cell ending with one shows the
        run's view once, where it was drawn live.
        """
        try:
            return self._mkl(line, cell)
        except UsageError as exc:  # it may repeat the line's words: a URL with its password, a key
            shown = without_secrets(str(exc))
            if shown == str(exc):
                raise
            raise UsageError(shown) from None

    def _mkl(self, line: str, cell: str | None) -> Run | Batch | None:
        try:
            words = split_words(line)
        except ValueError as exc:
            raise UsageError(f"%mkl: {exc} in: {line}") from None
        try:
            if cell is not None:
                return self._cell(words, cell)
            return self._line(words)
        except USER_ERRORS as exc:
            raise UsageError(str(exc)) from None
        except HelpShown:
            return None

    def _cell(self, words: list[str], cell: str) -> Run | None:
        if words and words[0] != "run":
            raise UsageError("%%mkl takes no arguments to define a machine, or 'run [flags]' to define and run it")
        machine = self.session.shelf.define(cell, first_line=self._body_first_line(cell))
        if not words:
            self._show_definition(machine)
            return None
        args = self._parse("run", words[1:])
        if args.name and args.name != machine.name:
            raise UsageError(
                f"%%mkl run defines '{machine.name}'; drop the name '{args.name}' or run it with %mkl run {args.name}"
            )
        return self._run(machine.name, args)

    def _body_first_line(self, body: str) -> int:
        """The number, in the cell as the person sees it, of the first line of a ``%%mkl`` cell's body.

        IPython hands the magic the cell without its ``%%mkl`` line, so the body starts on line 2; and without
        the empty lines above ``%%mkl``, which it drops first: the raw cell, in the history when it is kept,
        says how many there were.
        """
        history = getattr(self.shell, "history_manager", None)
        raw = history.input_hist_raw[-1] if history is not None and history.input_hist_raw else ""
        above = raw[: len(raw) - len(raw.lstrip("\n\r\t "))]
        if not raw.lstrip().startswith("%%") or not raw.rstrip().endswith(body.rstrip()) or "\n" not in above:
            return 2
        return 2 + above.count("\n")

    def _line(self, words: list[str]) -> Run | Batch | None:
        if not words or words[0] == "help":
            print(HELP)
            return None
        command, rest = words[0], words[1:]
        if command not in SUBCOMMANDS:
            raise UsageError(f"%mkl: unknown subcommand '{command}'; use one of {', '.join(SUBCOMMANDS)}")
        given: Run | Batch | None = getattr(self, f"_cmd_{command}")(rest)
        return given

    def _parse(self, name: str, words: list[str]) -> argparse.Namespace:
        return self.parsers[name].parse_args(words)

    # -- running ---------------------------------------------------------------------------

    def _show_definition(self, machine: Machine, *, calls_known: bool = False) -> None:
        """The machine's diagram and its warnings (see :meth:`Workspace.definition_findings`)."""
        display(diagram_bundle(machine), raw=True)
        for finding in self.session.shelf.definition_findings(machine, calls_known=calls_known):
            print(finding)

    def _cmd_run(self, words: list[str]) -> Run | None:
        args = self._parse("run", words)
        if not args.name:
            raise UsageError("%mkl run needs a machine name (or use %%mkl run in the machine's cell)")
        return self._run(self.values.text(args.name), args)

    def _run(self, name: str, args: argparse.Namespace) -> Run | None:
        self.session.shelf.machine(name)  # an unknown machine is a usage error before anything is drawn
        text = self.values.maybe_text
        run_id = text(args.run_id)
        view = self._view(run_id or name, self.session.machines.get(name))
        asked = from_flags(
            StartRequest,
            args,
            text,
            id=run_id,
            input=self.values.host_values(args.input, args.set),
            observer=view.observer,
        )

        def again(**choice: Any) -> None:  # a button of the untrusted run's banner: run with that choice
            self.present(self.session.start(name, asked, **choice), view)

        view.start()
        try:
            with _running(view):
                run = self.session.start(name, asked)
        except Untrusted as problem:
            choices = self._take_up_choices(problem, again)
            if problem.added is None and self.session.equipment.can_call(asked.script, asked.model):
                # the store holds none of it, and calls can be made here: a run of this cell's own may begin beside it
                choices.append(("Run it here as a new run", lambda _name: again(anew=True)))
            view.untrusted(problem, choices)
            return None
        self.present(run, view)
        return run

    def _take_up_choices(
        self, problem: Untrusted, again: Callable[..., None]
    ) -> list[tuple[str, Callable[[str], None]]]:
        """The buttons of a run a file holds that is not trusted: trust its signer's key under the name the
        person typed (the one step the view names), or take it up this once; each then runs ``again`` (with
        ``trust_file`` for the latter)."""
        choices: list[tuple[str, Callable[[str], None]]] = []
        if problem.provenance.refused is None:  # (an answer from someone the run does not let answer: never)
            choices.append(("Take up the file's run", lambda _name: again(trust_file=True)))
        key = problem.provenance.key
        if key is not None and problem.provenance.name is not None:  # signed by a key unknown here

            def trust_and_take_up(name: str, key: str = key) -> None:
                self.session.equipment.trust_key(key, name)
                again()

            choices.insert(0, (f"Trust key {key_fingerprint(key)} under that name, take it up", trust_and_take_up))
        return choices

    def _view(self, run_id: str, machine: Machine | None) -> RunView:
        """The outputs of a run in the executing cell, which its forms' replies will belong to."""
        current = self.notebook.current_cell()
        cell = current[0] if current else None
        name = self.notebook.notebook_named()
        return RunView(
            run_id,
            machine,
            cell=cell,
            notebook=name,
            signer=self.session.equipment.signer(),
            kernel=self.notebook,
            unattended=self.notebook.unattended(),
            mirrored=served_by_voila(),
        )

    def present(self, run: Run, view: RunView) -> None:
        """Show a run and, when it waits for a person, a form whose click resumes it here (the view follows the
        run, and draws it again as it moves)."""
        view.show(run)
        run.drawn_in = self.shell.execution_count if self.shell is not None else None

    def _cmd_map(self, words: list[str]) -> Batch:
        args = self._parse("map", words)
        name = self.values.text(args.name)
        self.session.shelf.machine(name)  # an unknown machine is a usage error before anything is drawn
        over = self.values.object(args.over)
        bars: list[Any] = []  # drawn once the rows are counted
        shown: list[Any] = []

        def progress(done: int, total: int) -> None:
            if not bars:
                bars.append(_progress_bar(f"{name}: rows", total))
                shown.append(display(bars[0].container, display_id=True))
            bars[0].update(done - bars[0].n)

        text = self.values.maybe_text
        try:
            request = from_flags(
                MapRequest,
                args,
                text,
                id=text(args.batch),
                input=self.values.host_values(args.input, args.set),
                progress=progress,
            )
            result = run_batch(self.session, name, over, request)
        finally:
            for bar, handle in zip(bars, shown, strict=True):
                bar.close()
                ran = f"{name}: {bar.total} row{'s' if bar.total != 1 else ''} run"  # alike every time: no timings
                handle.update({"text/plain": ran, "text/html": f"<p><small>{html.escape(ran)}</small></p>"}, raw=True)
        result.progress = bars[0] if bars else None
        table = display(result.bundle(), raw=True, display_id=True)
        if table is not None:  # when the extension answers, the checkpoints leave the output for the metadata
            self.notebook.link.when_linked(lambda: table.update(result.bundle(), raw=True))
        current = self.notebook.current_cell()
        cell = current[0] if current else None
        waiting = result.waiting()
        if waiting and self.notebook.unattended() is not None:
            # Nobody can click here (papermill, nbconvert): the questions and their commands are printed, and no
            # queue's widgets go into the file the client saves.
            asked = [(run.id, run.run_result) for run in waiting]
            display(batch_place(asked, [run.id for run in waiting], self.notebook.notebook_named()), raw=True)
        elif waiting:
            place: list[Any] = []
            notebook = self.notebook.notebook_named()

            def moved() -> None:
                if table is not None:
                    table.update(result.bundle(), raw=True)
                still = result.waiting()
                if place and not still:  # all answered: say what, where they were asked
                    place[0].answered(batch_answered_bundle(result.answered_in(cell)))
                elif place and place[0].printed is not None:  # the printed questions: those still waiting
                    asked_now = [(run.id, run.run_result) for run in still]
                    place[0].printed.update(batch_place(asked_now, [run.id for run in waiting], notebook), raw=True)

            where = cell or f"execution:{self.shell.execution_count if self.shell is not None else 0}"
            form = ReviewQueue(waiting, moved, cell, self.notebook, place=f"{where}/batch:{result.name}")
            asked = [(run.id, run.run_result) for run in waiting]
            form.show(batch_place(asked, [run.id for run in waiting], notebook))
            place.append(form)
            result.form = form
        else:
            answered = result.answered_in(cell)
            if answered:  # this cell's queue answered them before: it says so again, as it read once answered
                display(batch_answered_bundle(answered), raw=True)
                display({"text/plain": ""}, raw=True)  # where the queue stood, emptied (see ReviewQueue.answered)
        result.drawn_in = self.shell.execution_count if self.shell is not None else None
        return result

    def _cmd_resume(self, words: list[str]) -> Run:
        args = self._parse("resume", words)
        text = self.values.maybe_text
        run = self.session.get_run(
            self.values.text(args.run_id),
            script=text(args.script),
            trust_file=args.trust_file,
            model=text(args.model),
        )
        view = self._view(run.id, run.machine)
        view.start()
        with _running(view):
            run.resume(
                from_flags(
                    ContinueRequest,
                    args,
                    text,
                    set_values=self.values.assignments(args.reply_set),
                    via="notebook",
                    observer=view.observer,
                )
            )
        self.present(run, view)
        return run

    # -- the runs of this kernel ------------------------------------------------------------

    def _cmd_forget(self, words: list[str]) -> None:
        run_id = self.values.text(self._parse("forget", words).run_id)
        self.session.forget(run_id)
        print(f"Forgot run '{run_id}': it is gone from {self.session.store.location} and the notebook's metadata.")

    def _cmd_pending(self, words: list[str]) -> ReviewQueue | None:
        args = self._parse("pending", words)
        if args.all is not None:
            under = waiting_questions(Path(self.values.text(args.all)), self.session.keyring)
            stale = [f"{old['where']}: run {old['run']} is stale: {old['stale']}" for old in under.stale]
            stale += [f"{kept['where']}: run {kept['run']} is refused: {kept['refused']}" for kept in under.refused]
            display(views.questions_bundle(under.questions, under.problems + stale), raw=True)
            return None
        answered = self.notebook.answered_here()  # re-executed: the runs this cell's forms answered, as left
        shown = {run.id for run in answered}
        waiting, untrusted = self.session.waiting()
        queue = None
        if args.queue and waiting:  # one review queue for them all, instead of a form each
            queue = self._pending_queue([run for run in waiting if run.id not in shown])
            waiting = []
        runs = answered + [run for run in waiting if run.id not in shown]
        if not runs and not untrusted and queue is None:
            print("No run is waiting for a person.")
            return None
        for run in runs:
            assert isinstance(run, Run)
            self.present(run, self._view(run.id, run.machine))
        for problem in untrusted:  # someone else's: shown with whose it is; taken up only by a click
            view = self._view(problem.run_id, None)

            def take_up(run_id: str = problem.run_id, view: RunView = view, trust_file: bool = False) -> None:
                run = self.session.get_run(run_id, trust_file=trust_file)
                assert isinstance(run, Run)
                view.machine = run.machine
                self.present(run, view)

            view.untrusted(problem, self._take_up_choices(problem, take_up))
        return queue

    def _pending_queue(self, runs: list[Any]) -> ReviewQueue:
        """``%mkl pending --queue``: every question that waits, in one review queue below the printed questions
        (readable without a kernel, with the commands that answer them)."""
        current = self.notebook.current_cell()
        cell = current[0] if current else None
        place: list[ReviewQueue] = []

        def moved() -> None:
            if place and not place[0].items:  # all answered: say what, where they were asked
                given = [(run.id, run.answers_in(cell)) for run in runs]
                said = [(run_id, answers) for run_id, answers in given if answers]
                place[0].answered(batch_answered_bundle(said, "No question waits here any more. Answered here:"))

        where = cell or f"execution:{self.shell.execution_count if self.shell is not None else 0}"
        queue = ReviewQueue(runs, moved, cell, self.notebook, place=f"{where}/pending-queue")
        asked = [(run.id, run.run_result) for run in runs]
        queue.show(batch_place(asked, [run.id for run in runs], self.notebook.notebook_named()))
        place.append(queue)
        return queue

    def _cmd_notebook(self, words: list[str]) -> None:
        path = self._parse("notebook", words).path
        found = self.notebook.choose_notebook(self.values.text(path)) if path else self.notebook.notebook_found()
        if found.path is not None:
            print(f"This kernel runs {found.path}: {found.how}.")
        elif found.ambiguous:
            print(found.fix())
        else:
            print(f"This kernel does not know which notebook it runs: {found.how}.")

    def _cmd_config(self, words: list[str]) -> None:
        settings = self.session.settings
        for word in words:
            key, sep, value = word.partition("=")
            if not sep:
                raise UsageError(f"%mkl config takes key=value, got {word!r}")
            settings.change(key, self.values.text(value))
            if key in ("store", "durability"):  # the store is opened again, as the settings now say
                self.session.reset_store()
        print("\n".join([*settings.lines(), *shown_beside(self.session)]))


def _progress_bar(description: str, total: int) -> Any:
    """tqdm's notebook progress bar (a widget), or its text twin where widgets cannot be shown."""
    from tqdm.notebook import tqdm

    return tqdm(total=total, desc=description, unit="row", display=False)


def _executing_cell(shell: Any, notebook: KernelNotebook) -> tuple[str, str] | None:
    """The notebook cell the kernel executes now (JupyterLab names it in the request's metadata; for clients
    that do not, the notebook finds it by its source), and the request's id; None outside a cell's execution (a
    form's click, a plain IPython shell)."""
    kernel = getattr(shell, "kernel", None)
    parent = kernel.get_parent() if kernel is not None and hasattr(kernel, "get_parent") else None
    if not isinstance(parent, dict):
        return None
    header, metadata = parent.get("header") or {}, parent.get("metadata") or {}
    if header.get("msg_type") != "execute_request":
        return None
    execution = str(header.get("msg_id") or "")
    cell = metadata.get("cellId")
    if not isinstance(cell, str) or not cell:
        code = (parent.get("content") or {}).get("code")
        cell = notebook.cell_for(code, execution) if isinstance(code, str) and code.strip() else None
    return (cell, execution) if cell else None


def _extension_may_listen(shell: Any) -> bool:
    """Whether a frontend that may have the mkl-notebook extension started this kernel: a Jupyter server names
    the notebook's session (``JPY_SESSION_NAME``, which ipykernel turns into ``__session__``); VS Code, nbclient,
    papermill and ``jupyter nbconvert`` have no such extension, and would log the comm they cannot handle."""
    user_ns = shell.user_ns
    session = user_ns.get("__session__") or os.environ.get("JPY_SESSION_NAME")
    return bool(session) and "__vsc_ipynb_file__" not in user_ns


def load_magics(shell: Any) -> MklMagics:
    """Register the magics with ``shell`` over this process's session, and open the link to the notebook's
    metadata where a frontend that may have the mkl-notebook JupyterLab extension listens."""
    session = current_session()
    notebook = notebook_of(session)
    notebook.user_ns = shell.user_ns
    notebook.current_cell = lambda: _executing_cell(shell, notebook)
    loop = getattr(getattr(shell, "kernel", None), "io_loop", None)
    if loop is not None:  # a kernel: runs answered by another process redraw where they are shown
        notebook.wake = loop.add_callback
    magics = MklMagics(shell, session)
    shell.register_magics(magics)
    if _extension_may_listen(shell):
        notebook.link.open()
    if magics not in shell.configurables:
        shell.configurables.append(magics)  # so %config MklMagics.model = … works
    return magics
