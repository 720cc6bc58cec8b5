"""How a person's answer is read, the same way from every front end.

A reply comes as ``--reply TEXT``, as ``--set PATH=VALUE`` naming the path the run waits
on, or as a form's decision (Approve / Reject, with or without a typed note). A note
(``--note TEXT``, ``note=``, the text typed beside Approve / Reject) goes beside the reply and
never changes it. An in-doubt tool call is settled with ``--resolve completed=VALUE | retry | abort``.
"""

from __future__ import annotations

import getpass
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Literal, NamedTuple

from ..durable.policy import decided, policy_said
from ..durable.reading import RunState, approvers_in, claimed_name, escalated_to, established_how, replies
from ..durable.records import NOTE_MAX
from ..durable.replay import JournalIndex
from ..durable.runs import Resolution, not_waiting
from ..lang.interpolate import fmt
from ..render.common import answer_time, who_answered
from .errors import UsageProblem

Decision = Literal["approve", "reject"]
APPROVE: Decision = "approve"
REJECT: Decision = "reject"


class Answerer(NamedTuple):
    """Who answers, as a reply record keeps it: the name (``by``), how it is established (a key of
    ``engine.oracle.ESTABLISHED_BY``; None: only claimed), and a name the replier gave beside it."""

    by: str
    established: str | None
    claimed: str | None


class NotAnApprover(UsageProblem):
    """A reply from someone the run does not let answer its questions: refused, and nothing journaled."""


def approvers_of(index: JournalIndex) -> tuple[str, ...]:
    """Who run's journal (``index``) lets answer its questions: the one approver a deadline escalated the waiting
    question to, else the run's own rule (empty: anyone)."""
    escalated = escalated_to(index.journal)
    return (escalated,) if escalated is not None else approvers_in(index.options)


def not_an_approver(approvers: Sequence[str], answering: Answerer) -> str | None:
    """Why ``answering`` may not answer a question only ``approvers`` may (None: they may; no rule lets anyone).
    Only an *established* name counts: one claimed (``--as``, the page's word) never does."""
    if not approvers or (answering.established is not None and answering.by in approvers):
        return None
    you = f"{answering.by} ({answering.established})" if answering.established else f"known only as {answering.by!r}"
    return (
        f"may be answered only by {', '.join(approvers)} (as the hub or the operating system establishes who "
        f"answers); you are {you}"
    )


def not_approved_reply(reply: Mapping[str, Any], approvers: Sequence[str], key_name: str | None) -> str | None:
    """Why a reply that a copy of a run brings (someone's notebook) may not stand where only ``approvers`` may
    answer, in a phrase naming who answered and who may; None when it may (no rule lets anyone). It stands when
    the name its record establishes (not one only claimed) is an approver, or ``key_name`` is: the name this
    person trusts the key that signed it under (None: a key not trusted, or no signature)."""
    by = reply.get("by")
    if not approvers or (established_how(reply) is not None and by in approvers) or key_name in approvers:
        return None
    who = who_answered(by, established_how(reply), claimed_name(reply)) or "no one named"
    signed = f"signed by the key you trust as {key_name!r}" if key_name is not None else "signed by no key you trust"
    question = reply.get("question") or reply.get("pos")
    return (
        f"the answer {fmt(reply.get('value'))[:80]!r} to question {question} is by {who}, {signed}, and only "
        f"{', '.join(approvers)} may answer it"
    )


def check_approver(run_id: str, question: str, approvers: Sequence[str], answering: Answerer) -> None:
    """Refuse (:class:`NotAnApprover`) a reply to ``question`` from ``answering`` unless the run lets them answer
    (see :func:`not_an_approver`)."""
    why = not_an_approver(approvers, answering)
    if why is not None:
        raise NotAnApprover(f"question {question} of run '{run_id}' {why}: nothing was recorded")


def parse_approvers(value: Any, flag: str) -> tuple[str, ...]:
    """The names a run's ``--approvers`` (or the ``approvers`` setting) gives: comma-separated text, or a list."""
    if value is None or value == "" or value == ():
        return ()
    names = value.split(",") if isinstance(value, str) else value
    if not isinstance(names, (list, tuple, set, frozenset)) or not all(isinstance(name, str) for name in names):
        raise UsageProblem(f"{flag} takes names separated by commas (e.g. alice,bob), not {value!r}")
    cleaned = tuple(sorted({name.strip() for name in names if name.strip()}))
    if not cleaned:
        raise UsageProblem(f"{flag} names nobody: give the names of the people who may answer (e.g. alice,bob)")
    return cleaned


def os_account() -> str | None:
    """The operating system account this process runs as, from the account database (not ``$USER``, which
    anyone may set); None where there is none (a container's uid with no name, say)."""
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError, OSError):
        return None


# The Jupyter server's user as the page a click came from reports it, while the click is handled (a notebook
# front end sets it: see :func:`clicked_by`).
_page_user: ContextVar[str | None] = ContextVar("page_user", default=None)


@contextmanager
def clicked_by(page_user: str | None) -> Iterator[None]:
    """While this holds, answers given here are the Jupyter server's user ``page_user`` (the identity the
    page a click came from reports; None: no page said)."""
    token = _page_user.set(page_user or None)
    try:
        yield
    finally:
        _page_user.reset(token)


CLI_VIAS = frozenset({"cli", "notebook-file"})  # answers given on the command line (``mkl resume``)


def answerer(claimed: str | None, *, via: str) -> Answerer:
    """Who answers, and how that is established.

    Established is only what the process can check itself: on the command line (``via`` one of
    :data:`CLI_VIAS`) the OS account; in a kernel ``$JUPYTERHUB_USER`` (which the Hub set for the user's own
    server, in the kernel's own environment), else the kernel's OS account. Whatever a client says is
    ``claimed``, recorded beside the established name, never in its place: the Jupyter server's user as the
    page a click came from reports it (:func:`clicked_by`: the kernel cannot tell that page's hello from one
    another client of the kernel sends), else ``--as``, ``user=``, ``by=``. With nothing established the
    claimed name is the name.
    """
    cli = via in CLI_VIAS
    page_user = None if cli else _page_user.get()
    hub_user = None if cli else os.environ.get("JUPYTERHUB_USER")
    account = os_account()
    if page_user:  # what the page a click came from says: any client of the kernel could say it, so a claim
        claimed = page_user
    if hub_user:
        return Answerer(hub_user, "jupyterhub", claimed)
    if account:
        return Answerer(account, "os-account", claimed)
    return Answerer(who(claimed), None, None)


def who(name: str | None = None) -> str:
    """Who answers: the name given (``--as``, ``%mkl config user=``), else the JupyterHub user, else the OS user."""
    if name:
        return name
    hub_user = os.environ.get("JUPYTERHUB_USER")
    if hub_user:
        return hub_user
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container's user, say)
        return "unknown"


def read_reply(
    index: JournalIndex, run_id: str, question: str | None, *, reply: Any, set_values: Mapping[str, Any] | None
) -> tuple[Any, str]:
    """The reply a request gives (``--reply``, ``--set``, a form's or the API's value) and the question it names
    (a reply that names none is refused with the one it should name; one to a question answered already is
    refused saying by whom, when and how). Whether the run waits on exactly that question is checked where the
    reply is journaled, under the run's lease."""
    state = index.state
    pending = state.question_id(run_id)
    answered = _answered(index.journal, question) if question != pending or decided(index.journal, pending) else None
    if answered is not None:
        now = (
            f"run '{run_id}' now waits on question {pending} ({state.shown!r})"
            if state.waits_for_reply and pending
            else not_waiting(run_id, state)
        )
        raise UsageProblem(f"question {question} was answered already: {answered}; {now}; nothing was recorded")
    value = reply_from_flags(state, run_id, reply=reply, set_values=set_values)
    refuse_placeholder(value)
    return value, require_question(state, run_id, question)


def _answered(records: Sequence[Mapping[str, Any]], question: str | None) -> str | None:
    """What the journal says a person answered to ``question`` (value, who and how known, when, through what),
    or None when it holds no answer to it."""
    ruled = decided(records, question)
    if ruled is not None:  # a deadline passed first: the run's rule decided it, and no one's answer comes after
        when = answer_time(ruled.get("time"))
        return f"{fmt(ruled.get('value'))!r} by policy ({policy_said(ruled)})" + (f" at {when}" if when else "")
    given = [record for record in replies(records) if question and record.get("question") == question]
    if not given:
        return None
    last = given[-1]
    who = who_answered(last.get("by"), established_how(last), claimed_name(last))
    when = answer_time(last.get("time"))
    return (
        f"{fmt(last.get('value'))!r}"
        + (f" by {who}" if who else "")
        + (f" at {when}" if when else "")
        + (f" via {last['via']}" if last.get("via") else "")
    )


def refuse_placeholder(value: Any) -> None:
    """Refuse a reply that is only a placeholder such as a printed command shows (``…``, ``...``,
    ``<your answer>``): pasted as it is, it would be journaled as the person's answer."""
    if isinstance(value, str) and _placeholder(value):
        raise UsageProblem(
            f"the reply {value!r} is a placeholder, not an answer: put your answer in its place "
            "(e.g. --reply approve); nothing was recorded"
        )


def require_question(state: RunState, run_id: str, question: str | None) -> str:
    """The question a reply names; a reply that names none is refused with the one it should name."""
    if question:
        return question
    pending = state.question_id(run_id)
    if pending is None:
        raise UsageProblem(not_waiting(run_id, state))
    raise UsageProblem(
        f"name the question this reply answers: add --question {pending} (run '{run_id}' asks: {state.shown!r})"
    )


class FormReply(NamedTuple):
    """What a form sends: the reply's value (exactly the button's word for Approve / Reject) and the note typed
    beside it (None when none was)."""

    value: str
    note: str | None = None


def form_reply(decision: Decision | None, text: str) -> FormReply | None:
    """A form's answer: the decision as the value, the typed text as its note (``approve`` with the note
    ``add an apology``).

    Without a decision the typed text is the reply, and there is no note; an empty one is no reply at all
    (None). A note longer than :data:`NOTE_MAX` is refused (:func:`checked_note`).
    """
    typed = text.strip()
    if decision is None:
        return FormReply(typed) if typed else None
    return FormReply(decision, checked_note(typed))


def checked_note(note: str | None, *, replied: bool = True) -> str | None:
    """A note as it is journaled: its surrounding blanks dropped, None when nothing is left. One longer than
    :data:`NOTE_MAX` characters is refused with the limit named, and so is one given with no reply
    (``replied`` False): a note is written beside a reply."""
    if note is None:
        return None
    if not isinstance(note, str):
        raise UsageProblem(f"a note is text, not {type(note).__name__}")
    text = note.strip()
    if len(text) > NOTE_MAX:
        raise UsageProblem(f"the note is {len(text):,} characters long; a note may have at most {NOTE_MAX:,}")
    if text and not replied:
        raise UsageProblem("a note goes beside a reply: give the reply too (--reply TEXT or --set PATH=TEXT)")
    return text or None


def reply_from_flags(state: RunState, run_id: str, *, reply: str | None, set_values: Mapping[str, Any] | None) -> Any:
    """The reply that ``--reply TEXT`` or ``--set PATH=VALUE`` gives, or None when neither was given.

    ``--set`` must name exactly the path the run waits on, and nothing else.
    """
    if reply is not None and set_values:
        raise UsageProblem("give the reply once: --reply TEXT or --set PATH=TEXT")
    if reply is not None or not set_values:
        return reply
    given = ", ".join(_paths(set_values))
    if not state.waits_for_reply:
        raise UsageProblem(f"{not_waiting(run_id, state)}, so --set {given} has nothing to answer")
    if state.reply_to is None:  # a model's question has no path in the context
        raise UsageProblem(f"run '{run_id}' waits for an answer to the model's question; give it with --reply TEXT")
    value: Any = set_values
    for part in state.reply_to.split("."):
        if not isinstance(value, Mapping) or set(value) != {part}:
            raise UsageProblem(
                f"run '{run_id}' is waiting for a reply at '{state.reply_to}'; --set {given} does not answer it "
                f"(use --set {state.reply_to}=TEXT or --reply TEXT)"
            )
        value = value[part]
    return value


def _paths(values: Mapping[str, Any], prefix: str = "") -> list[str]:
    paths = []
    for key, value in values.items():
        if isinstance(value, Mapping) and value:
            paths += _paths(value, f"{prefix}{key}.")
        else:
            paths.append(f"{prefix}{key}")
    return paths


def _placeholder(value: str) -> bool:
    """Whether ``value`` is only ``…``/``...`` or text in angle brackets, as printed commands show a blank."""
    text = value.strip()
    return (len(text) > 2 and text[0] == "<" and text[-1] == ">") or bool(text and not text.strip(".…"))


def parse_resolve(text: str | None) -> Resolution | None:
    """``--resolve completed=VALUE``, ``retry`` or ``abort``."""
    if text is None:
        return None
    action, sep, value = text.partition("=")
    if action == "completed" and sep:
        if value == "VALUE" or _placeholder(value):  # (VALUE: as the help says it, and commands printed before)
            raise UsageProblem(
                f"--resolve completed={value} names a placeholder, not what the tool returned: put that in its "
                "place; nothing was recorded"
            )
        return Resolution("completed", value)
    if action == "retry" and not sep:
        return Resolution("retry")
    if action == "abort" and not sep:
        return Resolution("abort")
    raise UsageProblem(f"--resolve takes completed=VALUE, retry or abort, not {text!r}")
