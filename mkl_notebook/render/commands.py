"""The one spelling of every ``mkl`` command a view, a listing or a status line prints for a person to paste.

Every file name, run id and value is quoted for a POSIX shell, so a store in ``my dir/`` pastes as one word. A
server address is printed only when it carries no credentials and no query (where keys travel); a run's
answers then come from the model the person configures instead.
"""

from __future__ import annotations

import contextlib
import shlex
import shutil
import sys
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from ..engine.result import RunResult

UNKNOWN_NOTEBOOK = "NOTEBOOK.ipynb"  # in commands, when the kernel was not told which file it runs


ANSWER_PLACEHOLDER = "<your answer>"  # in the command answering a model's question; refused as a reply (app)
RESULT_PLACEHOLDER = "<what the tool returned>"  # of an in-doubt call that happened; refused as it is (app)
GATE_REPLIES = ("approve", "reject")  # an approval gate's replies, as its form's buttons give them


_ON_THIS_TERMINAL: ContextVar[bool] = ContextVar("mkl_commands_on_this_terminal", default=False)


def program() -> str:
    """The ``mkl`` a printed command starts with. In what is saved into a file that travels (a notebook's
    outputs, whoever writes them), plain ``mkl``: a path of this machine means nothing on the recipient's. On
    the person's own terminal (:func:`on_this_terminal`), ``mkl`` as they can type it here: ``mkl`` when that is
    on PATH and is this installation's script, else the absolute path of the script beside this Python (a venv
    not activated), quoted for a POSIX shell; where there is no script, this Python running the package."""
    if not _ON_THIS_TERMINAL.get():
        return "mkl"
    beside = Path(sys.executable).parent / "mkl"
    found = shutil.which("mkl")
    if beside.is_file():
        if found is not None and Path(found).resolve() == beside.resolve():
            return "mkl"
        return shlex.quote(str(beside.absolute()))
    return f"{shlex.quote(sys.executable)} -m mkl_notebook.cli"


@contextlib.contextmanager
def on_this_terminal(here: bool = True) -> Iterator[None]:
    """Commands printed meanwhile are for the person's own terminal (``here``), or (``here`` False: a notebook
    written from the command line) for a file that travels."""
    token = _ON_THIS_TERMINAL.set(here)
    try:
        yield
    finally:
        _ON_THIS_TERMINAL.reset(token)


def shell_word(text: str) -> str:
    """``text`` as one word of a POSIX shell command (quoted only when it must be)."""
    return shlex.quote(text)


def _flag(name: str, value: str | None) -> str:
    return f" {name} {shlex.quote(value)}" if value else ""


def shown_api_base(address: str | None) -> str | None:
    """A server address as a command may print it: None when it carries credentials or a query."""
    if not address:
        return None
    parts = urlsplit(address)
    return None if "@" in parts.netloc or parts.query else address


def resume_command(
    run_id: str,
    *,
    notebook: str | None = None,
    checkpoint: str | None = None,
    store: str | None = None,
    script: str | None = None,
    tools: str | None = None,
    model: str | None = None,
    api_base: str | None = None,
    trust_file: bool = False,
    started_with: Mapping[str, str] | None = None,
) -> str:
    """``mkl resume`` for run ``run_id``: in a notebook file (``--run``), a checkpoint file, or a store (``--id``),
    with ``--store`` when it is not the default one (for a file, the store it is resumed in), naming the
    answers it drew on (a script, tools, a model), and ``--trust-file`` for a file's run this person does not
    trust (taken up only when they say so). ``started_with`` (a run's ``RunResult.started_with``) gives the
    script, tools and model not given otherwise."""
    if notebook is not None:
        where = f" {shlex.quote(notebook)} --run {shlex.quote(run_id)}{_flag('--store', store)}"
    elif checkpoint is not None:
        where = f" {shlex.quote(checkpoint)}{_flag('--store', store)}"
    else:
        where = f" --id {shlex.quote(run_id)}{_flag('--store', store)}"
    drawn = started_with or {}
    script, tools, model = script or drawn.get("script"), tools or drawn.get("tools"), model or drawn.get("model")
    answers = _flag("--script", script) + _flag("--tools", tools) + _flag("--model", model) + _trusting(trust_file)
    return f"{program()} resume{where}{answers}{_flag('--api-base', shown_api_base(api_base))}"


def trace_command(run_id: str, store: str | None = None) -> str:
    """``mkl trace`` printing every step of run ``run_id``."""
    return f"{program()} trace --id {shlex.quote(run_id)}{_flag('--store', store)} --all"


def trust_command(source: str) -> str:
    """``mkl trust`` for the keys that sealed a file's runs."""
    return f"{program()} trust {shlex.quote(source)}"


def trust_key_command(key: str, name: str, source: str | None = None) -> str:
    """``mkl trust`` for one key under ``name`` (a name free here; printable characters only): with ``source``
    (a file whose runs the key signed), the key by its fingerprint (``key`` is the fingerprint then), else
    ``key`` is the key itself."""
    shown = "".join(char for char in name if char.isprintable())[:60] or "NAME"
    if source:
        return f"{program()} trust {shlex.quote(source)} --key {key.replace(' ', '')} --name {shlex.quote(shown)}"
    return f"{program()} trust {shlex.quote(key)} --name {shlex.quote(shown)}"


def _trusting(trust_file: bool) -> str:
    return " --trust-file" if trust_file else ""


def reply_commands(base: str, question: str | None, model_asks: bool) -> list[str]:
    """``base`` (a resume command) answering ``question``, each as pasted it works: an approval gate's
    ``--reply approve`` and ``--reply reject`` (a note goes beside with ``--note``), a model's question with
    the person's answer in place of :data:`ANSWER_PLACEHOLDER` (which, pasted as it is, is refused)."""
    asked = f"{base} --question {question}" if question else base
    if model_asks:
        return [f"{asked} --reply {shlex.quote(ANSWER_PLACEHOLDER)}"]
    return [f"{asked} --reply {reply}" for reply in GATE_REPLIES]


def continue_commands(result: RunResult, base: str, question: str | None = None) -> list[str]:
    """The commands that continue a waiting or in-doubt run, after ``base`` (a :func:`resume_command`).

    A reply names the ``question`` it answers (the run's :meth:`RunResult.question_id`).
    """
    if result.status == "in_doubt":
        completed = shlex.quote(f"completed={RESULT_PLACEHOLDER}")
        return [f"{base} --resolve {completed}", f"{base} --resolve retry", f"{base} --resolve abort"]
    if result.status != "suspended":
        return []
    if result.error == "budget-exhausted":
        whose = f"the called machine '{result.machine}'" if result.machine else "the run"
        return [f"{base} --max-steps N  # N: the new step budget of {whose}"]
    if result.error == "cost-exhausted":
        return [f"{base} --max-tokens N"]
    if result.error == "spend-exhausted":
        return [f"{base} --max-cost USD  # a new limit for the whole run, in US dollars"]
    if not result.waits_for_person:  # a provider outage, no model where it was resumed: go on as it is
        return [base]
    return reply_commands(base, question, result.error == "asked")


def runs_command(store: str | None = None) -> str:
    """``mkl runs``: the runs of a store (the default one when ``store`` is None), each waiting one with the
    commands that answer it."""
    return f"{program()} runs{' ' + shlex.quote(store) if store else ''}"


def keep_command(notebook: str) -> str:
    """``mkl keep NOTEBOOK``: the command that puts a notebook's runs carried only in outputs into its metadata."""
    return f"{program()} keep {shlex.quote(notebook)}"
