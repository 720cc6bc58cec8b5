"""One machine over many rows: a durable run per row, the same from ``%mkl map`` and ``mkl map``.

Each row is one run's input. Its run id comes from a key column or from the row's content, so
running the same rows again replays every finished run for free, and a batch that was stopped
goes on where it stopped: the runs that finished replay, the others start or continue.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import queue
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..durable import runs as durable
from ..durable.errors import StoreError
from ..durable.runs import Outcome
from ..durable.stores import RunStore, check_run_id
from ..engine.options import RunOptions
from ..engine.oracle import Oracle
from ..lang import files
from ..lang.model import Machine
from .errors import USER_ERRORS, UsageProblem
from .handle import Run
from .status import usage

MAX_ROWS = 100_000
DEFAULT_CONCURRENCY = 8
_ID_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
RUN_ID_MAX = 80  # what a store takes


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


# -- reading rows ------------------------------------------------------------------------------------


def read_rows(source: Any, *, where: str = "--over") -> list[dict[str, Any]]:
    """The rows of ``source``: a list of mappings, a pandas DataFrame, or a JSONL, JSON or CSV file's path.

    Every row becomes plain JSON values (a run's input is journaled as JSON); a row that is not a mapping
    of names, or a file line that is not a JSON object, is refused with its place.
    """
    if isinstance(source, (str, Path)):
        return _rows_from_file(Path(source), f"{where} {source}")
    if hasattr(source, "to_dict") and hasattr(source, "columns"):  # a DataFrame: one mapping per row
        source = source.to_dict(orient="records")
    if not isinstance(source, Sequence) or isinstance(source, (bytes, bytearray)):
        raise UsageProblem(
            f"{where} must be a list of dicts, a pandas DataFrame, or a .jsonl, .json or .csv file, "
            f"not {type(source).__name__}"
        )
    return _checked([*source], where)


def _rows_from_file(path: Path, where: str) -> list[dict[str, Any]]:
    try:
        text = files.read_text(path, files.SCRIPT_LIMIT)
    except OSError as exc:
        raise UsageProblem(f"{where}: cannot be read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise UsageProblem(f"{where}: is not UTF-8 text") from None
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return _checked(list(csv.DictReader(io.StringIO(text))), where)
    if suffix in (".json", ".jsonl", ".ndjson"):
        try:  # measured whole: a list of rows, or a row a line
            files.check_json(text)
        except files.UnfitJson as exc:
            raise UsageProblem(f"{where}: {exc} to be read as rows") from None
    if suffix == ".json":
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise UsageProblem(f"{where}: is not valid JSON ({exc})") from None
        if not isinstance(data, list):
            raise UsageProblem(f"{where}: must hold a JSON list of objects, one per row")
        return _checked(data, where)
    if suffix not in (".jsonl", ".ndjson"):
        raise UsageProblem(f"{where}: rows are read from .jsonl, .json or .csv files, not {suffix or 'a bare name'}")
    rows: list[Any] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise UsageProblem(f"{where}, line {number}: is not valid JSON ({exc})") from None
        if not isinstance(row, dict):
            raise UsageProblem(f"{where}, line {number}: must be a JSON object, not {type(row).__name__}")
        rows.append(row)
    return _checked(rows, where)


def _checked(rows: list[Any], where: str) -> list[dict[str, Any]]:
    if len(rows) > MAX_ROWS:
        raise UsageProblem(f"{where}: {len(rows):,} rows is more than one batch takes ({MAX_ROWS:,}); split it")
    checked = []
    for index, row in enumerate(rows):
        if not isinstance(row, Mapping) or not all(isinstance(key, str) for key in row):
            raise UsageProblem(f"{where}: row {index + 1} must be a mapping of names to values, not {row!r:.80}")
        # A missing value (a DataFrame's NaN) is null; then as the journal will hold it, in JSON values.
        values = {key: None if isinstance(value, float) and math.isnan(value) else value for key, value in row.items()}
        try:
            checked.append(json.loads(json.dumps(values, ensure_ascii=False, default=str, allow_nan=False)))
        except ValueError as exc:  # infinity has no JSON form
            raise UsageProblem(f"{where}: row {index + 1} holds a value JSON cannot carry ({exc})") from None
    return checked


# -- run ids -------------------------------------------------------------------------------------------


def _id_part(value: Any, room: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
    return _ID_UNSAFE.sub("_", text).strip("_")[:room] or "_"


def plan_rows(rows: Sequence[Mapping[str, Any]], batch: str, key: str | None = None) -> list[RowRun]:
    """A run id for each row: ``BATCH-KEYVALUE`` with a ``key`` column (unique per row), else
    ``BATCH-`` and a digest of the row's content (a repeated row gets ``-2``, ``-3`` …, in order)."""
    try:
        check_run_id(batch)
    except StoreError:
        raise UsageProblem(
            f"batch id {batch!r}: use letters, digits, '.', '_', ':' and '-', starting with a letter or digit"
        ) from None
    room = RUN_ID_MAX - len(batch) - 8  # for the dash and a repeat's suffix
    if room < 10:
        raise UsageProblem(f"batch id {batch!r} is too long to name its rows' runs: keep it under 60 characters")
    planned: list[RowRun] = []
    seen: dict[str, int] = {}
    for index, row in enumerate(rows):
        if key is not None:
            if key not in row:
                raise UsageProblem(
                    f"--key {key}: row {index + 1} has no '{key}' (it has {', '.join(row) or 'nothing'})"
                )
            run_id = f"{batch}-{_id_part(row[key], room)}"
            if run_id in seen:
                raise UsageProblem(
                    f"--key {key}: rows {seen[run_id] + 1} and {index + 1} both make run id '{run_id}'; a key names "
                    "one row"
                )
        else:
            content = json.dumps(row, ensure_ascii=False, sort_keys=True).encode("utf-8", "surrogatepass")
            run_id = f"{batch}-{hashlib.blake2b(content, digest_size=5).hexdigest()}"
            base, repeat = run_id, 2
            while run_id in seen:
                run_id, repeat = f"{base}.{repeat}", repeat + 1
        seen[run_id] = index
        planned.append(RowRun(index, run_id, dict(row)))
    return planned


# -- running ------------------------------------------------------------------------------------------------


def run_rows(
    machine: Machine,
    rows: Sequence[RowRun],
    *,
    store: RunStore,
    oracle_for: Callable[[], Oracle],
    registry: Mapping[str, Machine] | None = None,
    options: RunOptions | None = None,
    input: Mapping[str, Any] | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    fresh: bool = False,
    origin: Mapping[str, Any] | None = None,
    tick: float = 0.2,
    endorse: durable.Endorse | None = None,
) -> Iterator[RowRun | None]:
    """Run every row, ``concurrency`` at a time; yield each row as its run stops, on the caller's thread.

    ``input`` is laid under every row (values each row shares). Between rows it yields None every
    ``tick`` seconds, so a progress display can redraw from the caller's thread. A row whose run
    cannot be made (its run is held by another process, say) comes back with ``error`` and the others
    go on. If the caller stops (an interrupt), rows not yet started are not started, and the rows
    already running finish their runs: every finished or suspended run is journaled, so running the
    batch again goes on from there.
    """
    if concurrency < 1:
        raise UsageProblem(f"--concurrency must be at least 1, not {concurrency}")
    shared = dict(input or {})
    stopping = threading.Event()  # the batch stops: rows not started yet are not started

    def one(row: RowRun) -> RowRun:
        if stopping.is_set():
            row.error = "not started: the batch stopped first"
            return row
        try:
            row.outcome = durable.start(
                machine,
                oracle_for(),
                store=store,
                run_id=row.run_id,
                registry=registry,
                input={**shared, **row.input},
                options=options,
                fresh=fresh,
                origin=origin,
                endorse=endorse,
            )
        except USER_ERRORS as exc:
            row.error = str(exc)
        except BaseException:  # an interrupt, or a failure of ours: the batch stops here
            stopping.set()
            raise
        return row

    pool = ThreadPoolExecutor(max_workers=min(concurrency, max(1, len(rows))), thread_name_prefix="mkl-row")
    finished: queue.SimpleQueue[Future[RowRun]] = queue.SimpleQueue()  # each row as it ends: waiting costs no scan
    try:
        for row in rows:
            pool.submit(one, row).add_done_callback(finished.put)
        for _ in rows:
            while True:
                try:
                    future = finished.get(timeout=tick)
                    break
                except queue.Empty:
                    yield None
            yield future.result()
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


def overall(rows: Sequence[RowRun]) -> str:
    """The batch's status: its worst row's (an error, a halt, a doubt, a wait), ``done`` when all are done."""
    present = {row.status for row in rows}
    return next((status for status in STATUS_ORDER if status in present), "done")
