"""The audit trail: every answer a person gave, on a run, a notebook, a store or a folder, and what stands behind it.

Each answer is one row: the run, the question as shown, what it was about (text and digest), the value and
note, who answered and how that is established, the key whose signature covers the reply record (whether it
verifies and whether the key is trusted here), when it was asked and answered, and through what. An answer
whose signature fails, that no signature covers, whose subject no longer matches what the run asked, or that
is by someone the run does not let answer (a copy from someone's notebook: ``accepted_under`` says it was
not) is marked (``problem``), never listed as valid. Questions still waiting are counted, with their age.

Reading only, as a listing reads (:mod:`app.listing`): stores are opened read-only, under a folder no link
out of it is followed, and no key, store or side file is made. Read as it goes (:class:`AuditStream`): one run
of a store in memory at a time, each answer given as its run is read, so that an audit of many answers costs
no more memory than one of a few; a run that cannot be read is one line, and the runs after it are read still.
"""

from __future__ import annotations

import hashlib
import statistics
import time
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..checkpoints import notebook_file as nbfile
from ..checkpoints.notebook_disk import NotebookFileError
from ..checkpoints.seals import Seal, Signed, covering, key_fingerprint, signatures
from ..durable.chain import canonical, chain_start, chain_step
from ..durable.errors import StoreError
from ..durable.policy import policy_said
from ..durable.reading import claimed_name, established_how, root_of, run_state
from ..durable.records import kind_of
from ..durable.store_names import is_server_store, public_store
from ..durable.store_opening import close_store, open_store, store_there
from ..durable.stores import RunStore
from ..engine.result import question_id
from .errors import UsageProblem
from .listing import files_under
from .settings import default_store
from .trust import Keyring
from .workspace import Workspace

# The fields of an answer's row, in the order a CSV file's columns have them.
FIELDS = (
    "where",
    "run",
    "machine",
    "question_id",
    "question",
    "about",
    "about_sha256",
    "value",
    "note",
    "by",
    "established",
    "claimed",
    "key",
    "signed_as",
    "signature",
    "key_trusted",
    "trusted_as",
    "asked_at",
    "answered_at",
    "seconds_to_decide",
    "via",
    "accepted_under",
    "decided_by",
    "problem",
)
CLAIMED = "claimed"  # how a name is established when only the replier's word says it
REFUSED = "not accepted"  # an answer's rule when it is by someone the run does not let answer


@dataclass
class Audit:
    """Every answer found (one row each), the questions still waiting, and one line per file not read."""

    answers: list[dict[str, Any]] = field(default_factory=list)
    pending: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def marked(self) -> int:
        """How many answers are marked (their signature fails, none covers them, or their subject changed)."""
        return sum(1 for row in self.answers if row["problem"])

    def median_seconds(self) -> float | None:
        """The median time from question to answer, over the answers whose question's time is known."""
        times = [
            row["seconds_to_decide"]
            for row in self.answers
            if row["seconds_to_decide"] is not None and row["decided_by"] != "policy"
        ]
        return statistics.median(times) if times else None

    def summary(self) -> dict[str, Any]:
        return {
            "answers": len(self.answers),
            "marked": self.marked,
            "pending": len(self.pending),
            "median_seconds_to_decide": self.median_seconds(),
            "not_read": list(self.problems),
        }


@dataclass(frozen=True)
class _History:
    """One copy of a run's history as a file holds it."""

    where: str
    run_id: str
    records: list[dict[str, Any]]
    seal: Seal | None = None  # a notebook copy's whole-checkpoint seal


# -- reading one history -----------------------------------------------------------------------------


def _identity(reply: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """Who answered, and how that is known: a key of ``ESTABLISHED_BY`` ("os-account", "jupyterhub",
    "jupyter-server"), or ``claimed`` when only the replier's word says it (every answer journaled before
    identities were established)."""
    by = reply.get("by")
    return (str(by), established_how(reply) or CLAIMED) if by else (None, None)


def _digest(text: str | None) -> str | None:
    return None if text is None else hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class _Judge:
    """Whether a signing key is trusted here, and under which name (the name this reader gave it; "you" for their
    own: :meth:`Keyring.known_as`), judged without making a key (a listing writes nothing)."""

    def __init__(self, keyring: Keyring) -> None:
        self.keyring = keyring
        self._names: dict[str, str] | None = None  # by fingerprint

    def trusted_as(self, key: str) -> str | None:
        if self._names is None:
            self._names = self.keyring.known_as()
        return self._names.get(key_fingerprint(key))

    def trusts(self, key: str) -> bool:
        return self.trusted_as(key) is not None


def _signature(stretch: Signed | None, judge: _Judge) -> tuple[dict[str, Any], str | None]:
    """The signature facts of a reply record's row, and the problem they make (None: it verifies)."""
    seal = stretch.seal if stretch is not None else None
    if seal is None:
        return {
            "key": None,
            "signed_as": None,
            "signature": "none",
            "key_trusted": None,
            "trusted_as": None,
        }, "not signed"
    facts = {
        "key": key_fingerprint(seal.key),
        "signed_as": seal.by,
        "signature": "verifies" if seal.holds else "fails",
        "key_trusted": judge.trusts(seal.key),
        "trusted_as": judge.trusted_as(seal.key),  # whose this reader knows the key to be (None: nobody's)
    }
    return facts, None if seal.holds else "signature does not verify (changed after it was signed)"


def _subject_problem(
    run_id: str, reply: Mapping[str, Any], asked: Mapping[str, Any] | None, later: Sequence[Mapping[str, Any]]
) -> str | None:
    """Why the answer no longer answers what the run asked, if it does not: it names another question than
    the one asked, it was about other content, or the run later asked again about something else."""
    if asked is not None:
        shown = str(asked.get("ask") or asked.get("question") or "")
        about, pinned = asked.get("about"), asked.get("pinned")
        asked_id = question_id(
            run_id,
            str(asked.get("pos")),
            shown,
            about if isinstance(about, str) else None,
            pinned if isinstance(pinned, str) else None,
        )
        if reply.get("question") and reply.get("question") != asked_id:
            return "answers another question than the one the run asked"
        if "about" in reply and isinstance(about, str) and reply.get("about") != about:
            return "its subject is not what the run asked about"
    for again in later:
        if isinstance(again.get("about"), str) and "about" in reply and again.get("about") != reply.get("about"):
            return "no longer stands: the run asked again about something else"
    return None


def _rows(history: _History, judge: _Judge) -> list[tuple[dict[str, Any], str]]:
    """One row per answer a history records, each with its reply record's canonical text."""
    records, run_id = history.records, history.run_id
    stretches = signatures(records, history.seal)
    machine = root_of(records) or None
    asked: dict[str, Mapping[str, Any]] = {}  # the latest question at each position, up to here
    refused = dict(judge.keyring.refused_replies(records, history.seal))  # (by someone the run does not let answer)
    rows = []
    for index, record in enumerate(records):
        kind = kind_of(record)
        if kind == "suspend" and record.get("pos") is not None:
            asked[str(record.get("pos"))] = record
        if kind not in ("reply", "policy"):
            continue
        position = str(record.get("pos"))
        question = asked.get(position)
        later = [r for r in records[index + 1 :] if kind_of(r) == "suspend" and str(r.get("pos")) == position]
        stretch = covering(stretches, index)
        signed, unsigned = _signature(stretch, judge)
        not_let = f"refused: {refused[index]}" if index in refused else None
        problems = [p for p in (not_let, unsigned, _subject_problem(run_id, record, question, later)) if p]
        about = record.get("about", question.get("about") if question is not None else None)
        about = about if isinstance(about, str) else None
        asked_at = _number(question.get("time")) if question is not None else None
        answered_at = _number(record.get("time"))
        by, established = _identity(record)
        row = {
            "where": history.where,
            "run": run_id,
            "machine": machine,
            "question_id": record.get("question"),
            "question": str(question.get("ask") or question.get("question") or "") if question else None,
            "about": about,
            "about_sha256": _digest(about),
            "value": record.get("value"),
            "note": record.get("note"),
            "by": by,
            "established": established,
            "claimed": claimed_name(record),
            **signed,
            "asked_at": asked_at,
            "answered_at": answered_at,
            "seconds_to_decide": (
                round(answered_at - asked_at, 3) if asked_at is not None and answered_at is not None else None
            ),
            "via": record.get("via"),
            "accepted_under": REFUSED if index in refused else accepted_under(record),
            "decided_by": "person",
            "problem": "; ".join(problems) or None,
        }
        if kind == "policy":  # the run's rule decided, past the deadline: no one's answer, and said so
            row.update(_policy_row(record))
        rows.append((row, canonical(record)))
    return rows


def _policy_row(record: Mapping[str, Any]) -> dict[str, Any]:
    """What a policy decision's row says instead of a person: the decision, and the rule (its digest, who set it)."""
    action = str(record.get("action"))
    escalated = record.get("escalate_to")
    return {
        "value": record.get("value", f"{action} to {escalated}" if escalated else action),
        "via": "policy",
        "accepted_under": f"policy: {policy_said(record)}",
        "decided_by": "policy",
    }


def accepted_under(reply: Mapping[str, Any]) -> str:
    """The rule a reply was taken under: the approvers the run named then, or anyone (journals from before
    runs named approvers say nothing: anyone)."""
    approvers = reply.get("approvers")
    if isinstance(approvers, list) and approvers:
        return "approvers: " + ", ".join(str(name) for name in approvers)
    return "anyone"


def _waiting(history: _History, now: float) -> dict[str, Any] | None:
    """The question a history ends waiting on, with its age; None when it waits on none."""
    state = run_state(history.records)
    asked_id = state.question_id(history.run_id)
    if asked_id is None:
        return None
    last: Mapping[str, Any] = next((r for r in reversed(history.records) if kind_of(r) == "suspend"), {})
    asked_at = _number(last.get("time"))
    return {
        "where": history.where,
        "run": history.run_id,
        "machine": root_of(history.records) or None,
        "question_id": asked_id,
        "question": state.shown,
        "about": state.about,
        "about_sha256": _digest(state.about),
        "asked_at": asked_at,
        "age_seconds": None if asked_at is None else round(max(0.0, now - asked_at), 3),
    }


class _Copies:
    """Which waiting copies of a run another copy goes past, told as the histories arrive one at a time.

    Where a run can have several copies (notebooks, a folder), each history read leaves the places of its records
    in its chain (:data:`_PLACE` bytes each, by run): a copy goes past another when it is longer and its chain
    passes through the other's end. Where it cannot (one store: a run once), only the questions waiting are kept.
    (So a folder's audit still grows with its runs, by some hundreds of bytes each; a store's does not.)
    """

    def __init__(self, several: bool) -> None:
        self.several = several
        self._chains: dict[str, list[bytes]] = {}
        self._waiting: list[tuple[dict[str, Any], bytes, list[bool]]] = []  # a question, its copy's places, passed

    def note(self, history: _History, waiting: dict[str, Any] | None) -> None:
        """Take in one history (and the question it ends waiting on, if any)."""
        if not self.several:
            if waiting is not None:
                self._waiting.append((waiting, b"", [False]))
            return
        chain = _chain_places(history.records)
        for asked, end, passed in self._waiting:
            if asked["run"] == history.run_id and not passed[0] and _passes(chain, end):
                passed[0] = True
        others = self._chains.setdefault(history.run_id, [])
        if waiting is not None:
            self._waiting.append((waiting, chain, [any(_passes(other, chain) for other in others)]))
        others.append(chain)

    def pending(self) -> list[dict[str, Any]]:
        """The questions still waiting: each once, in no copy a longer copy of the same run goes past."""
        found: list[dict[str, Any]] = []
        for asked, _, passed in self._waiting:
            if not passed[0] and all(
                (w["run"], w["question_id"]) != (asked["run"], asked["question_id"]) for w in found
            ):
                found.append(asked)
        return found


_PLACE = 16  # bytes of a record's place in its chain that an audit keeps (of its SHA-256)


def _chain_places(records: Sequence[Mapping[str, Any]]) -> bytes:
    """Each record's place in its history (the chain digest after it, cut to :data:`_PLACE` bytes), in order."""
    digest, places = chain_start(), bytearray()
    for record in records:
        digest = chain_step(digest, record)
        places += digest[:_PLACE]
    return bytes(places)


def _passes(chain: bytes, other: bytes) -> bool:
    """Whether the history whose places are ``chain`` is a longer copy of the one whose places are ``other``:
    it goes on past the other's last record, through the same place."""
    end = len(other)
    return 0 < end < len(chain) and chain[end - _PLACE : end] == other[-_PLACE:]


Source = Iterator[_History | str]  # a target's histories as they are read, and a line for each one not read


class AuditStream:
    """An audit read as it goes: :meth:`answers` gives each answer's row as its run is read (a store's runs one at
    a time; a notebook is read whole, as its file is one JSON document); once they are all given, the counts,
    :meth:`median_seconds`, ``pending`` and ``problems`` say the rest. An answer that several copies hold alike
    is given once (where first found); a question waits only in a copy no longer copy of the same run goes past.
    Close it (or use it as a context manager) when done."""

    def __init__(
        self,
        histories: Iterable[_History | str],
        keyring: Keyring | None,
        *,
        several: bool,
        problems: Sequence[str] = (),
        close: Callable[[], None] | None = None,
    ) -> None:
        self._histories = histories
        self._judge = _Judge(keyring or Keyring())
        self._copies = _Copies(several)
        self._close = close
        self._seen: set[bytes] = set()  # answers given, where several copies of a run can hold one
        self._times = array("d")  # each answer's time to decide, when known (for the median)
        self._now = time.time()
        self.count = 0
        self.marked = 0
        self.problems = list(problems)
        self.pending: list[dict[str, Any]] = []

    def __enter__(self) -> AuditStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Let go of what the audit reads (a store it opened)."""
        close, self._close = self._close, None
        if close is not None:
            close()

    def answers(self) -> Iterator[dict[str, Any]]:
        """Every answer's row (see :data:`FIELDS`), as the runs are read; the rest is known once they are given."""
        for history in self._histories:
            if isinstance(history, str):
                self.problems.append(history)
                continue
            seen = self._seen if self._copies.several else set()  # (a store holds a run once)
            for row, text in _rows(history, self._judge):
                said = canonical([row["run"], text, row["signature"], row["problem"]]).encode("utf-8", "surrogatepass")
                key = hashlib.blake2b(said, digest_size=16).digest()
                if key in seen:
                    continue
                seen.add(key)
                self.count += 1
                self.marked += bool(row["problem"])
                if row["seconds_to_decide"] is not None and row["decided_by"] != "policy":  # (a person's time)
                    self._times.append(row["seconds_to_decide"])
                yield row
            self._copies.note(history, _waiting(history, self._now))
        self.pending = self._copies.pending()
        self.close()

    def median_seconds(self) -> float | None:
        """The median time from question to answer, over the answers given whose question's time is known."""
        return statistics.median(self._times) if self._times else None

    def whole(self) -> Audit:
        """Every answer read at once (what a notebook shows in one piece)."""
        with self:
            answers = list(self.answers())
        return Audit(answers, self.pending, self.problems)


# -- what a target holds -----------------------------------------------------------------------------


def _notebook_histories(path: Path, shown: str) -> tuple[list[_History], list[str]]:
    """Every run a notebook carries (its copies reconciled as ``mkl runs`` reads them), and its damaged ones."""
    embedded, damaged = nbfile.scan(path)
    histories = [_History(f"{shown} ({run.where})", run.run_id, run.records, run.seal) for run in embedded]
    return histories, [f"{shown}, {bad.where}: {bad.reason}" for bad in damaged]


def _store_histories(store: RunStore, shown: str, run_id: str | None, every: Iterable[str]) -> Source:
    """The runs of ``store`` (run ``run_id`` only, when given; else those ``every`` names) read one at a time; a
    run that cannot be read is a line saying why, and the runs after it are read still."""
    if run_id is not None and not store.exists(run_id):
        raise UsageProblem(f"{shown}: holds no run '{run_id}'")
    return _each_run(store, shown, [run_id] if run_id is not None else every)


def _each_run(store: RunStore, shown: str, run_ids: Iterable[str]) -> Source:
    for each in run_ids:
        try:
            records = store.read(each)
        except StoreError as exc:
            yield str(exc)
            continue
        yield _History(shown, each, records)


def _run_ids(store: RunStore) -> Iterable[str]:
    """The ids of a store's runs: a few at a time where the store can list them so (a file's), else its list."""
    listed = getattr(store, "run_ids", None)
    return listed() if callable(listed) else (run.run_id for run in store.runs())


def _open_store(location: str | Path) -> RunStore:
    """The store at ``location`` (a file, or a server's URL), opened read-only (a file refused when it is none of
    ours)."""
    return open_store(location if is_server_store(location) else Path(location), read_only=True)


def _store_file(path: Path, shown: str) -> Source:
    """A store file's runs as a folder's audit reads them: a store that cannot be opened is one line."""
    try:
        store = _open_store(path)
    except StoreError as exc:
        yield str(exc)
        return
    try:
        yield from _store_histories(store, shown, None, _run_ids(store))
    except StoreError as exc:  # (the list of its runs cannot be read)
        yield str(exc)
    finally:
        close_store(store)


def stream_store(location: str | Path, run_id: str | None = None, keyring: Keyring | None = None) -> AuditStream:
    """Every answer in the run store at ``location`` (a file, or a server's URL; of run ``run_id`` only, when
    given), read run by run; read-only. A store that cannot be opened, or holds no such run, is refused here,
    before any answer is read."""
    store = _open_store(location)
    try:
        runs = _store_histories(store, store.location, run_id, _run_ids(store))
    except BaseException:
        close_store(store)
        raise
    return AuditStream(runs, keyring, several=False, close=lambda: close_store(store))


def stream_notebook(path: str | Path, keyring: Keyring | None = None) -> AuditStream:
    """Every answer on the runs a notebook file carries (its metadata's and its outputs' copies)."""
    histories, damaged = _notebook_histories(Path(path), str(path))
    return AuditStream(histories, keyring, several=True, problems=damaged)


def _folder_histories(folder: Path) -> Source:
    for path, shown, refused in files_under(folder):
        if refused is not None:
            yield refused
        elif path.suffix == ".ipynb":
            try:
                found, damaged = _notebook_histories(path, shown)
            except NotebookFileError as exc:
                yield str(exc)
                continue
            yield from found
            yield from damaged
        else:
            yield from _store_file(Path(shown), shown)


def stream_folder(folder: str | Path, keyring: Keyring | None = None) -> AuditStream:
    """Every answer in the notebooks and run stores under ``folder``, read as ``mkl runs DIR`` reads them, one
    file and one store's run at a time: stores read-only, no link out of the folder followed; a file (or a run)
    that cannot be read is one line."""
    return AuditStream(_folder_histories(Path(folder)), keyring, several=True)


def stream_target(
    target: str | None, *, store: str | Path | None = None, keyring: Keyring | None = None
) -> AuditStream:
    """What ``mkl audit`` lists, read as it goes: a notebook (``.ipynb``), a folder, or a run of the store
    (``store``, else the default one); no ``target``: every run of that store."""
    if target is not None and store is None:
        if target.endswith(".ipynb"):
            return stream_notebook(target, keyring)
        if Path(target).is_dir():
            return stream_folder(target, keyring)
    return stream_store(store if store is not None else default_store(), target, keyring)


def audit_target(target: str | None, *, store: str | Path | None = None, keyring: Keyring | None = None) -> Audit:
    """:func:`stream_target`'s audit read whole."""
    return stream_target(target, store=store, keyring=keyring).whole()


def workspace_audit(ws: Workspace, target: str | None = None) -> Audit:
    """What ``%mkl audit`` lists: a notebook or a folder it names, else a run of the workspace's store (every
    run, with no ``target``); a store not opened yet is read from its file, and not made or changed."""
    if target is not None and (target.endswith(".ipynb") or Path(target).is_dir()):
        return audit_target(target, keyring=ws.keyring)
    opened = ws.store_opened()
    if opened is not None:
        listed = (run.run_id for run in opened.runs())  # (the store a kernel writes in: its list, as it stands)
        return AuditStream(_store_histories(opened, opened.location, target, listed), ws.keyring, several=False).whole()
    if not store_there(ws.settings.store):
        if target is not None:
            raise UsageProblem(f"{public_store(str(ws.settings.store))}: holds no run '{target}'")
        return Audit()
    return stream_store(ws.settings.store, target, ws.keyring).whole()
