"""One machine over many rows: a durable run per row, the same from ``%mkl map`` and ``mkl map``.

Each row is one run's input. Its run id comes from a key column or from the row's content, so
running the same rows again replays every finished run for free, and a batch that was stopped
goes on where it stopped: the runs that finished replay, the others start or continue.
"""

from __future__ import annotations

import array
import csv
import hashlib
import heapq
import itertools
import json
import math
import queue
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Sized
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ..durable import runs as durable
from ..durable.errors import StoreError
from ..durable.runs import Outcome
from ..durable.stores import RUN_ID_MAX, RunStore, check_run_id
from ..engine.options import RunOptions
from ..engine.oracle import Oracle
from ..lang import files
from ..lang.model import Machine
from .defaults import DEFAULT_CONCURRENCY
from .errors import USER_ERRORS, UsageProblem
from .handle import Run
from .status import usage

MAX_ROWS = 100_000
_ID_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass
class Ran:
    """A batch that ran: its name, its rows in the order given (each with its run's outcome, or why it could
    not run), and a handle on each run that was made."""

    name: str
    rows: list[RowRun]
    runs: dict[str, Run]


@dataclass
class RowRun:
    """One row of a batch and its run: the outcome once it stopped, or why the row could not run."""

    index: int  # 0-based, in the order the rows were given
    run_id: str
    input: dict[str, Any]
    outcome: Outcome | None = None
    error: str | None = None

    @property
    def status(self) -> str:
        """The run's status, or ``error`` when the row could not run at all."""
        return self.outcome.result.status if self.outcome is not None else "error"

    @property
    def waits_for_person(self) -> bool:
        return self.outcome is not None and self.outcome.result.waits_for_person


@dataclass
class Running:
    """A batch whose rows are checked and named, to be run by iterating: each row as its run stops (``total`` in
    all), and the oracle each row's run was given."""

    name: str
    total: int
    stops: Iterator[RowRun]
    oracle_for: Callable[[], Oracle]

    def __iter__(self) -> Iterator[RowRun]:
        return self.stops


def told(stops: Iterator[RowRun | None], total: int, progress: Callable[[int, int], None] | None) -> Iterator[RowRun]:
    """The rows of ``stops`` (see :func:`run_rows`), telling ``progress(done, total)`` at the start, as each
    stops and at every tick between."""
    done = 0
    if progress is not None:
        progress(0, total)
    for stopped in stops:
        if stopped is not None:
            done += 1
        if progress is not None:
            progress(done, total)
        if stopped is not None:
            yield stopped


# -- reading rows ------------------------------------------------------------------------------------

ROWS_FILE_LIMIT = 4 * 1024**3  # a .jsonl or .csv file is read a line at a time: its lines, not its size, cost memory
LINE_LIMIT = files.SCRIPT_LIMIT  # one line of it


def read_rows(source: Any, *, where: str = "--over") -> list[dict[str, Any]]:
    """The rows of ``source``: a list of mappings, a pandas DataFrame, or a JSONL, JSON or CSV file's path.

    Every row becomes plain JSON values (a run's input is journaled as JSON); a row that is not a mapping
    of names, or a file line that is not a JSON object, is refused with its place.
    """
    return list(iter_rows(source, where=where))


def iter_rows(source: Any, *, where: str = "--over") -> Iterator[dict[str, Any]]:
    """The rows of ``source`` as :func:`read_rows` gives them, one at a time: a .jsonl or .csv file is read a
    line at a time (a batch holds a row of it, not the file); a .json file is one list, read whole."""
    if isinstance(source, (str, Path)):
        rows: Iterator[Any] = _rows_from_file(Path(source), f"{where} {source}")
    else:
        if hasattr(source, "to_dict") and hasattr(source, "columns"):  # a DataFrame: one mapping per row
            source = source.to_dict(orient="records")
        if not isinstance(source, Sequence) or isinstance(source, (bytes, bytearray)):
            raise UsageProblem(
                f"{where} must be a list of dicts, a pandas DataFrame, or a .jsonl, .json or .csv file, "
                f"not {type(source).__name__}"
            )
        rows = iter(source)
    for index, row in enumerate(rows):
        if index == MAX_ROWS:
            raise UsageProblem(f"{where}: more than {MAX_ROWS:,} rows is more than one batch takes; split it")
        yield _checked(row, index, where)


def _rows_from_file(path: Path, where: str) -> Iterator[Any]:
    suffix = path.suffix.lower()
    if suffix not in (".json", ".jsonl", ".ndjson", ".csv"):
        raise UsageProblem(f"{where}: rows are read from .jsonl, .json or .csv files, not {suffix or 'a bare name'}")
    try:
        if suffix == ".json":
            yield from _json_list(files.read_text(path, files.SCRIPT_LIMIT), where)
            return
        files.check_regular(path, ROWS_FILE_LIMIT)
        with path.open(encoding="utf-8", newline="" if suffix == ".csv" else None) as handle:
            if suffix == ".csv":
                yield from csv.DictReader(_lines(handle, where))
                return
            for number, line in enumerate(_lines(handle, where), 1):
                if line.strip():
                    yield _json_line(line, f"{where}, line {number}")
    except OSError as exc:
        raise UsageProblem(f"{where}: cannot be read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise UsageProblem(f"{where}: is not UTF-8 text") from None


def _lines(handle: IO[str], where: str) -> Iterator[str]:
    for number in itertools.count(1):
        line = handle.readline(LINE_LIMIT + 1)
        if not line:
            return
        if len(line) > LINE_LIMIT:
            raise UsageProblem(f"{where}, line {number}: is longer than a row may be ({LINE_LIMIT:,} characters)")
        yield line


def _json_list(text: str, where: str) -> list[Any]:
    try:  # measured whole before it is parsed
        files.check_json(text)
    except files.UnfitJson as exc:
        raise UsageProblem(f"{where}: {exc} to be read as rows") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise UsageProblem(f"{where}: is not valid JSON ({exc})") from None
    if not isinstance(data, list):
        raise UsageProblem(f"{where}: must hold a JSON list of objects, one per row")
    return data


def _json_line(line: str, where: str) -> dict[str, Any]:
    try:
        files.check_json(line)
        row = json.loads(line)
    except files.UnfitJson as exc:
        raise UsageProblem(f"{where}: {exc} to be read as a row") from None
    except ValueError as exc:
        raise UsageProblem(f"{where}: is not valid JSON ({exc})") from None
    if not isinstance(row, dict):
        raise UsageProblem(f"{where}: must be a JSON object, not {type(row).__name__}")
    return row


def _checked(row: Any, index: int, where: str) -> dict[str, Any]:
    if not isinstance(row, Mapping) or not all(isinstance(key, str) for key in row):
        raise UsageProblem(f"{where}: row {index + 1} must be a mapping of names to values, not {row!r:.80}")
    # A missing value (a DataFrame's NaN) is null; then as the journal will hold it, in JSON values.
    values = {key: None if isinstance(value, float) and math.isnan(value) else value for key, value in row.items()}
    try:
        checked: dict[str, Any] = json.loads(json.dumps(values, ensure_ascii=False, default=str, allow_nan=False))
    except ValueError as exc:  # infinity has no JSON form
        raise UsageProblem(f"{where}: row {index + 1} holds a value JSON cannot carry ({exc})") from None
    return checked


# -- run ids -------------------------------------------------------------------------------------------


def _id_part(value: Any, room: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
    return _ID_UNSAFE.sub("_", text).strip("_")[:room] or "_"


def _digest(run_id: str) -> int:
    return int.from_bytes(hashlib.blake2b(run_id.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "big")


class RowPlan:
    """A batch's rows, each with its run id, checked before any runs: a ``key`` column's value (unique per row)
    names a row's run ``BATCH-VALUE``, else ``BATCH-`` and a digest of its content (a repeated row gets
    ``.2``, ``.3`` …, in order).

    Iterating gives the rows as :class:`RowRun` one at a time, reading the source again, so a batch of a
    .jsonl or .csv file holds the rows running, not all of them. To find the ids rows share it keeps 8 bytes
    a row (a digest of each id), and the ids of the few rows whose digests repeat.
    """

    def __init__(self, source: Any, batch: str, key: str | None = None, *, where: str = "--over") -> None:
        try:
            check_run_id(batch)
        except StoreError:
            raise UsageProblem(
                f"batch id {batch!r}: use letters, digits, '.', '_', ':' and '-', starting with a letter or digit"
            ) from None
        self.room = RUN_ID_MAX - len(batch) - 8  # for the dash and a repeat's suffix
        if self.room < 10:
            raise UsageProblem(f"batch id {batch!r} is too long to name its rows' runs: keep it under 60 characters")
        self.source, self.batch, self.key, self.where = source, batch, key, where
        digests = array.array("Q", (_digest(self._base_id(row, index)) for index, row in self._read()))
        self.total = len(digests)
        digests = array.array("Q", sorted(digests))
        self._shared = {one for one, two in itertools.pairwise(digests) if one == two}  # a repeat, or a collision
        if key is not None and self._shared:
            self._refuse_repeated_keys()

    def _read(self) -> Iterator[tuple[int, dict[str, Any]]]:
        return enumerate(iter_rows(self.source, where=self.where))

    def _base_id(self, row: Mapping[str, Any], index: int) -> str:
        if self.key is None:
            content = json.dumps(row, ensure_ascii=False, sort_keys=True).encode("utf-8", "surrogatepass")
            return f"{self.batch}-{hashlib.blake2b(content, digest_size=5).hexdigest()}"
        if self.key not in row:
            raise UsageProblem(
                f"--key {self.key}: row {index + 1} has no '{self.key}' (it has {', '.join(row) or 'nothing'})"
            )
        return f"{self.batch}-{_id_part(row[self.key], self.room)}"

    def _refuse_repeated_keys(self) -> None:
        seen: dict[str, int] = {}
        for index, row in self._read():
            run_id = self._base_id(row, index)
            if _digest(run_id) not in self._shared:
                continue
            if run_id in seen:
                raise UsageProblem(
                    f"--key {self.key}: rows {seen[run_id] + 1} and {index + 1} both make run id '{run_id}'; a key "
                    "names one row"
                )
            seen[run_id] = index

    def __len__(self) -> int:
        return self.total

    def __iter__(self) -> Iterator[RowRun]:
        repeats: Counter[str] = Counter()  # of the ids whose digests repeat
        for index, row in self._read():
            if index == self.total:
                return  # the file grew since it was read: the rows checked are the batch
            run_id = self._base_id(row, index)
            if _digest(run_id) in self._shared:
                repeats[run_id] += 1
                if repeats[run_id] > 1:
                    run_id = f"{run_id}.{repeats[run_id]}"
            yield RowRun(index, run_id, row)


def plan_rows(rows: Sequence[Mapping[str, Any]], batch: str, key: str | None = None) -> list[RowRun]:
    """Each of ``rows`` with its run id, as :class:`RowPlan` names them."""
    return list(RowPlan(rows, batch, key))


# -- running ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RowStart:
    """What every row's run of a batch starts with: the machine (and the machines it calls), the store, a
    fresh oracle per row, the run options, the values every row shares (``input``), whether each row's run
    starts over, what its start record says it drew on, and who endorses what it appends."""

    machine: Machine
    store: RunStore
    oracle_for: Callable[[], Oracle]
    registry: Mapping[str, Machine] | None = None
    options: RunOptions | None = None
    input: Mapping[str, Any] | None = None
    fresh: bool = False
    origin: Mapping[str, Any] | None = None
    endorse: durable.Endorse | None = None


def run_rows(
    start: RowStart, rows: Iterable[RowRun], *, concurrency: int = DEFAULT_CONCURRENCY, tick: float = 0.2
) -> Iterator[RowRun | None]:
    """Run every row as ``start`` says, ``concurrency`` at a time; yield each row as its run stops, on the
    caller's thread.

    ``start.input`` is laid under every row (values each row shares). Rows are taken from ``rows`` as there is
    room to run them, and a row yielded is the caller's to drop: the batch holds the rows running, not all of
    them. Between rows it yields None every ``tick`` seconds, so a progress display can redraw from the caller's
    thread. A row whose run cannot be made (its run is held by another process, say) comes back with ``error``
    and the others go on. If the caller stops (an interrupt), rows not yet started are not started, and the
    rows already running finish their runs: every finished or suspended run is journaled, so running the
    batch again goes on from there.
    """
    if concurrency < 1:
        raise UsageProblem(f"--concurrency must be at least 1, not {concurrency}")
    shared = dict(start.input or {})
    stopping = threading.Event()  # the batch stops: rows not started yet are not started

    def one(row: RowRun) -> RowRun:
        if stopping.is_set():
            row.error = "not started: the batch stopped first"
            return row
        try:
            row.outcome = durable.start(
                start.machine,
                start.oracle_for(),
                store=start.store,
                run_id=row.run_id,
                registry=start.registry,
                input={**shared, **row.input},
                options=start.options,
                fresh=start.fresh,
                origin=start.origin,
                endorse=start.endorse,
            )
        except USER_ERRORS as exc:
            row.error = str(exc)
        except BaseException:  # an interrupt, or a failure of ours: the batch stops here
            stopping.set()
            raise
        return row

    workers = min(concurrency, len(rows)) if isinstance(rows, Sized) else concurrency
    pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="mkl-row")
    finished: queue.SimpleQueue[Future[RowRun]] = queue.SimpleQueue()  # each row as it ends: waiting costs no scan
    waiting = iter(rows)
    running = 0
    try:
        while True:
            while running < 2 * workers:  # each worker has a row to take up next
                row = next(waiting, None)
                if row is None:
                    break
                pool.submit(one, row).add_done_callback(finished.put)
                running += 1
            if not running:
                return
            try:
                future = finished.get(timeout=tick)
            except queue.Empty:
                yield None
                continue
            running -= 1
            yield future.result()
            del future  # the row is the caller's now
    finally:
        stopping.set()
        pool.shutdown(wait=True, cancel_futures=True)


# -- what a batch says ----------------------------------------------------------------------------------


def row_summary(row: RowRun) -> dict[str, Any]:
    """One row as a listing and the status line give it: its run, status, result or error, usage and
    cost, and the question it waits on."""
    summary: dict[str, Any] = {"row": row.index + 1, "run": row.run_id, "status": row.status}
    if row.outcome is None:
        summary["error"] = row.error
        return summary
    result = row.outcome.result
    summary.update(error=result.error, result=result.result, usage=usage(result), calls=row.outcome.calls)
    question = result.question_id(row.run_id)
    if question is not None:
        summary.update(question_id=question, ask=result.ask or result.question, reply_to=result.reply_to)
    return summary


def counts(rows: Sequence[RowRun]) -> dict[str, int]:
    """How many rows stand at each status, most common first."""
    return dict(Counter(row.status for row in rows).most_common())


STATUS_ORDER = ("error", "halt", "in_doubt", "suspended", "done")


def overall(rows: Iterable[RowRun] | Mapping[str, int]) -> str:
    """The batch's status: its worst row's (an error, a halt, a doubt, a wait), ``done`` when all are done
    (``rows``, or the count at each status)."""
    present = set(rows) if isinstance(rows, Mapping) else {row.status for row in rows}
    return next((status for status in STATUS_ORDER if status in present), "done")


KEPT_ROWS = 1_000  # a batch's rows a summary holds: all of a batch this size, else the rows not done
KEPT_WAITING = 4  # rows that wait whose questions are kept for their commands (more are listed by `mkl runs`)


class Tally:
    """What a batch's rows came to, told a row at a time in bounded memory: the count at each status, tokens and
    cost summed, how many rows wait for a person (the first few with their results, for the commands that answer
    them), and the summaries (:func:`row_summary`) of at most ``keep`` rows: every row of a batch of ``total`` no
    more than ``keep``, else the rows not done, the first in row order."""

    def __init__(self, total: int, keep: int = KEPT_ROWS) -> None:
        self.total, self.keep = total, keep
        self.statuses: Counter[str] = Counter()
        self.tokens = 0
        self.cost = 0.0  # of the rows whose calls have a price
        self.unpriced = 0  # rows that ran with a call whose price is not known
        self.waiting = 0
        self.questions: list[tuple[int, str, Any]] = []  # (index, run id, result) of the first rows that wait
        self._kept: list[tuple[int, dict[str, Any]]] = []  # a heap on -index: the row last in order goes first
        self.left_out = 0

    def add(self, row: RowRun) -> None:
        """Count ``row`` in, keeping its summary or the question it waits on only where there is room."""
        self.statuses[row.status] += 1
        summary = row_summary(row)
        spent = summary.get("usage") or {}
        self.tokens += int(spent.get("input_tokens") or 0) + int(spent.get("output_tokens") or 0)
        if "cost_usd" in spent:
            self.cost += spent["cost_usd"]
        elif row.outcome is not None:
            self.unpriced += 1
        if row.outcome is not None and row.outcome.result.status in ("suspended", "in_doubt"):
            self.waiting += 1
            self.questions.append((row.index, row.run_id, row.outcome.result))
            self.questions = sorted(self.questions, key=lambda question: question[0])[:KEPT_WAITING]
        if self.total > self.keep and row.status == "done":
            self.left_out += 1
            return
        heapq.heappush(self._kept, (-row.index, summary))
        if len(self._kept) > self.keep:
            heapq.heappop(self._kept)
            self.left_out += 1

    @property
    def counts(self) -> dict[str, int]:
        """How many rows stand at each status, most common first."""
        return dict(self.statuses.most_common())

    @property
    def status(self) -> str:
        return overall(self.statuses)

    def rows(self) -> list[dict[str, Any]]:
        """The summaries kept, in row order."""
        return [summary for _, summary in sorted(self._kept, key=lambda kept: -kept[0])]

    def waiting_rows(self) -> list[tuple[str, Any]]:
        """(run id, result) of the first rows that wait for a person, in row order."""
        return [(run_id, result) for _, run_id, result in self.questions]

    def spent(self) -> dict[str, Any]:
        """The batch's tokens, and its cost in US dollars when every row that ran has a price (else None)."""
        priced = self.unpriced == 0 and sum(self.statuses.values()) > self.statuses.get("error", 0)
        return {"tokens": self.tokens, "cost_usd": round(self.cost, 8) if priced else None}
