"""The checkpoint envelope: one versioned JSON document that carries a whole run.

It is what a notebook embeds, what ``--checkpoint PATH`` writes and what
``mkl resume FILE`` reads.  Loading is JSON only (nothing is unpickled or
imported) and every envelope is verified against a digest chained over its
records, so a damaged or edited file is refused instead of half-trusted. A digest
only says the file is *intact*; its seal (``seals``), when it has one, says which
key made it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tempfile
import threading
import zlib
from collections import deque
from pathlib import Path
from typing import Any, NamedTuple

from .._version import __version__
from ..durable.chain import canonical, chain_digest
from ..durable.disk import replace_file
from ..durable.reading import unsigned_from
from ..durable.records import FORMAT, kind_of
from ..durable.replay import JournalIndex
from ..durable.runs import Outcome
from ..durable.stores import RUN_ID_MAX
from ..errors import UserError
from ..lang import files
from . import seals, shapes
from .codecs import CODECS, PACKED, PLAIN

COMPRESS_OVER = 2_048  # bytes of journal JSON above which it is stored compressed
# What a checkpoint's compressed journal may inflate to: a long run's journal is a few megabytes. Inflating is
# stopped there, and the JSON is measured before it is parsed (files.check_json), so that a few kilobytes that
# inflate to gigabytes, or to brackets nested a hundred thousand deep, are refused in a second or two.
MAX_JOURNAL_BYTES = 32 * 1024 * 1024
# What the journals of one file may inflate to together: a few journals of the largest size, or, for a larger
# file, sixteen times its size (journals compress five to ten times), so that reading a file costs time in
# proportion to it however many journals it packs.
FILE_INFLATION_FLOOR = 4 * MAX_JOURNAL_BYTES
FILE_INFLATION_RATIO = 16
HEADER_KEYS = (
    "format",
    "package",
    "run_id",
    "machine",
    "status",
    "error",
    "at",
    "ask",
    "reply_to",
    "question",
    "machines",
)
# Written by earlier releases, read (and covered by the digest) but no longer written: what the showing that
# wrote the checkpoint cost (it changed with every replay, so a re-run cell changed the saved file), and the
# run's options, which its start record holds (a copy of them in each checkpoint of a notebook of many runs).
LEGACY_HEADER_KEYS = ("calls", "options")
MIME_TYPE = "application/vnd.mkl.run+json"
# What a cell output carries instead of the checkpoint when the notebook's metadata holds it (one copy, not
# two): ``{"run": RUN, "records": N}``, the run and how much of its journal the cell shows.
REF_MIME_TYPE = "application/vnd.mkl.run-ref+json"
# A batch's output (``%mkl map``): a list with one entry per row's run, each a checkpoint envelope or,
# where the notebook's metadata holds the runs, a reference to the metadata's copy.
BATCH_MIME_TYPE = "application/vnd.mkl.batch+json"
MAX_REFERENCE_BYTES = 4_096


class EnvelopeError(UserError, ValueError):
    """An envelope that cannot be trusted or read; the message says what and where."""


class Checkpoint(NamedTuple):
    """A verified envelope: its header and records, and its seal when it has one."""

    header: dict[str, Any]
    records: list[dict[str, Any]]
    seal: seals.Seal | None


def _digest(header: dict[str, Any], records: list[dict[str, Any]]) -> str:
    chained = chain_digest(records)
    return hashlib.sha256(chained + canonical(header).encode("utf-8")).hexdigest()


def build(
    header: dict[str, Any],
    records: list[dict[str, Any]],
    *,
    compress: bool | None = None,
    signer: seals.Signer | None = None,
) -> dict[str, Any]:
    """An envelope for ``records`` with the given header fields (status, machines, …).

    Its records carry their own signatures (``sign`` records); only when its last records have none (a run
    journaled before signatures were, or advanced with no key) is the whole envelope sealed by ``signer``, so
    a history nobody changed is written byte for byte alike by whoever writes it. The journal is compressed
    when it is larger than a few kilobytes, unless ``compress`` says otherwise.
    """
    head = {key: header.get(key) for key in HEADER_KEYS if key not in ("format", "package")}
    head = {"format": FORMAT, "package": f"mkl-notebook {__version__}", **head}
    text = json.dumps(records, ensure_ascii=False, separators=(",", ":"), default=str)
    if compress if compress is not None else len(text) > COMPRESS_OVER:
        packed = CODECS[PACKED].pack(text.encode("utf-8"))
        journal: dict[str, Any] = {"encoding": PACKED, "count": len(records), "data": packed}
    else:
        journal = {"encoding": PLAIN, "count": len(records), "records": records}
    digest = _digest(head, records)
    built = {**head, "journal": journal, "digest": digest}
    seal = None
    if signer is not None and unsigned_from(records) < len(records):
        built["seal"] = signer.seal(digest)
        seal = seals.Seal(signer.key, signer.by, holds=True)
    with _BUILT_LOCK:
        _BUILT.append((built, _as_built(built), Checkpoint({key: built[key] for key in HEADER_KEYS}, records, seal)))
    return built


# The checkpoints this process built lately, each with what verifying it would find: a kernel reads back the one
# it just put in its notebook's metadata (the page's copy) on the next click, and need not check its own work.
# Held by identity, with the object itself (so no other can take its id); a checkpoint is never changed once
# built. A run's checkpoint each, for the few runs a page follows at once.
_BUILT: deque[tuple[dict[str, Any], dict[str, Any], Checkpoint]] = deque(maxlen=16)
_BUILT_LOCK = threading.Lock()


def _as_built(envelope: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``envelope``'s fields and journal as they are now (its records the same objects): an edit of
    either since is told by comparing, which costs a pointer per record."""
    journal = dict(envelope["journal"])
    if isinstance(journal.get("records"), list):
        journal["records"] = list(journal["records"])
    return {**envelope, "journal": journal}


def _built_here(envelope: Any) -> Checkpoint | None:
    """What verifying ``envelope`` finds, when it is a checkpoint this process built and nothing has edited since
    (None: it must be checked)."""
    with _BUILT_LOCK:
        for built, fields, checked in _BUILT:
            if built is envelope:
                return checked if envelope == fields else None
    return None


def outcome_header(outcome: Outcome) -> dict[str, Any]:
    """The header of a run's checkpoint: where it stands (from ``outcome``), its options and pinned machines."""
    index = JournalIndex.build(outcome.records)
    result = outcome.result
    return {
        "run_id": outcome.run_id,
        "machine": index.setup.get("root"),
        "status": result.status,
        "error": result.error,
        "at": result.at,
        "ask": result.ask,
        "reply_to": result.reply_to,
        "question": result.question,
        # The sources travel once, in the journal's start/rerun record; the header names and hashes them.
        "machines": [{"name": name, "sha256": pin["sha256"]} for name, pin in index.machines.items()],
    }


def checkpoint_of(outcome: Outcome, signer: seals.Signer | None = None) -> dict[str, Any]:
    """The checkpoint of the run ``outcome`` shows (sealed by ``signer`` where its records are not signed).

    The same history with the same header and signer has the checkpoint built last for it: a click puts the run
    in the notebook's metadata and draws its view, both with its checkpoint, built once."""
    header, records = outcome_header(outcome), outcome.records
    with _BUILT_LOCK:
        for built, fields, checked in reversed(_BUILT):
            if (
                checked.records is records
                and built["journal"]["count"] == len(records)
                and _signed_alike(built, records, signer)
                and all(built[key] == value for key, value in header.items())
                and built == fields
            ):
                return built
    return build(header, records, signer=signer)


def _signed_alike(built: dict[str, Any], records: list[dict[str, Any]], signer: seals.Signer | None) -> bool:
    """Whether ``built``, the checkpoint of ``records``, is sealed as ``signer`` would seal it now."""
    seal = built.get("seal")
    if seal is None:
        return signer is None or unsigned_from(records) == len(records)
    return signer is not None and seal["key"] == signer.key and seal["by"] == signer.by


class Inflation:
    """What the compressed journals of one file of ``size`` bytes may inflate to, together: a notebook carrying
    many journals that each inflate to just under :data:`MAX_JOURNAL_BYTES` is read no further than that."""

    def __init__(self, size: int = 0) -> None:
        self.limit = max(FILE_INFLATION_FLOOR, FILE_INFLATION_RATIO * size)
        self.left = self.limit

    def inflate(self, packed: str, where: str, encoding: str = PACKED) -> bytes:
        """The bytes ``packed`` (in ``encoding``, a codec's tag: see :mod:`.codecs`) inflates to, refused before
        they grow past either bound."""
        most = min(MAX_JOURNAL_BYTES, self.left)
        if len(packed) > (MAX_JOURNAL_BYTES + MAX_JOURNAL_BYTES // 64) // 3 * 4:  # compressing never grows it so
            raise EnvelopeError(f"{where}: the checkpoint's journal is larger than {_mb(MAX_JOURNAL_BYTES)}")
        inflater, data = CODECS[encoding].unpacker(packed)
        raw = inflater.decompress(data, most + 1)
        if len(raw) > most:
            if most < MAX_JOURNAL_BYTES:
                raise EnvelopeError(
                    f"{where}: the file's compressed journals inflate to more than {_mb(self.limit)} together; "
                    "this one is not read"
                )
            raise EnvelopeError(f"{where}: the checkpoint's journal inflates to more than {_mb(MAX_JOURNAL_BYTES)}")
        if not inflater.eof:
            raise EnvelopeError(f"{where}: the checkpoint's journal is damaged (its compressed data is cut short)")
        self.left -= len(raw)
        return raw


def _mb(count: int) -> str:
    return f"{count // (1024 * 1024)} MB"


def _records(journal: Any, where: str, inflation: Inflation | None = None) -> list[dict[str, Any]]:
    if not isinstance(journal, dict):
        raise EnvelopeError(f"{where}: the checkpoint has no journal")
    encoding = journal.get("encoding")
    if encoding == PLAIN:
        records = journal.get("records")
    elif isinstance(encoding, str) and encoding in CODECS:
        data = journal.get("data")
        if not isinstance(data, str):
            raise EnvelopeError(f"{where}: the checkpoint's journal data is missing")
        try:
            raw = (inflation or Inflation()).inflate(data, where, encoding)
            files.check_json(raw, depth=files.DOCUMENT_DEPTH)
            records = json.loads(raw.decode("utf-8"))
        except EnvelopeError:
            raise
        except files.UnfitJson as exc:
            raise EnvelopeError(f"{where}: the checkpoint's journal {exc}") from None
        except (ValueError, zlib.error, UnicodeDecodeError) as exc:
            raise EnvelopeError(f"{where}: the checkpoint's journal is damaged ({exc})") from None
    else:
        raise EnvelopeError(f"{where}: unknown journal encoding {encoding!r}")
    if not isinstance(records, list) or not all(isinstance(record, dict) for record in records):
        raise EnvelopeError(f"{where}: the checkpoint's journal is not a list of records")
    if journal.get("count") != len(records):
        raise EnvelopeError(
            f"{where}: the checkpoint's journal is truncated ({len(records)} of {journal.get('count')} records)"
        )
    if not records or kind_of(records[0]) != "start":
        raise EnvelopeError(f"{where}: the checkpoint's journal does not begin with a start record")
    return records


_DERIVED = re.compile(r"(.+):[A-Za-z0-9_.-]{1,16}-[0-9a-f]{4,6}")  # RUN:NAME-TAIL, as ``derived_id`` makes it


def names_run(run_id: str, started: str) -> bool:
    """Whether a checkpoint's ``run_id`` may name a history started as run ``started``: its own id, or an id
    derived from it to keep a copy apart (``RUN:NAME-TAIL``, of RUN cut short when the whole would be too long,
    or of an id derived so in turn). The header is outside the signatures; the start record is inside."""
    while run_id != started:
        found = _DERIVED.fullmatch(run_id)
        if found is None:
            return False
        base = found.group(1)
        if len(run_id) == RUN_ID_MAX and started.startswith(base):
            return True
        run_id = base
    return True


def verify(envelope: Any, where: str = "checkpoint") -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Check an envelope's format and digest; return its header and records."""
    checked = verify_checkpoint(envelope, where)
    return checked.header, checked.records


def verify_checkpoint(envelope: Any, where: str = "checkpoint", inflation: Inflation | None = None) -> Checkpoint:
    """Check an envelope's format, digest and the shape of every field; read its seal. Its journal, when it is
    compressed, inflates within ``inflation`` (the bounds of the file it is in), else within its own bound."""
    if not isinstance(envelope, dict):
        raise EnvelopeError(f"{where}: is not an mkl run checkpoint (expected a JSON object)")
    known = _built_here(envelope)
    if known is not None:
        return Checkpoint(dict(known.header), known.records, known.seal)
    if envelope.get("format") != FORMAT:
        found = envelope.get("format")
        raise EnvelopeError(f"{where}: is not an mkl run checkpoint of format {FORMAT} (found {found!r})")
    optional = {key for key in ("seal", *LEGACY_HEADER_KEYS) if key in envelope}
    expected = {*HEADER_KEYS, "journal", "digest"} | optional
    if set(envelope) != expected:
        odd = sorted(set(envelope) ^ expected)
        raise EnvelopeError(f"{where}: the checkpoint's fields were changed ({', '.join(odd)}); it is not used")
    records = _records(envelope.get("journal"), where, inflation)
    header = {key: envelope.get(key) for key in (*HEADER_KEYS, *LEGACY_HEADER_KEYS) if key in expected}
    if not isinstance(header["run_id"], str):
        raise EnvelopeError(f"{where}: the checkpoint names no run id")
    if envelope.get("digest") != _digest({k: v for k, v in header.items()}, records):
        raise EnvelopeError(
            f"{where}: the checkpoint's digest does not match its contents; it was changed or "
            "damaged, so it is not used"
        )
    problem = shapes.header_problem(header) or shapes.journal_problem(records)
    if problem is not None:
        where_in = "its header" if shapes.header_problem(header) else "its journal"
        raise EnvelopeError(f"{where}: the checkpoint is misshapen ({where_in}: {problem}); it is not used")
    started = records[0].get("run")
    if isinstance(started, str) and not names_run(header["run_id"], started):
        raise EnvelopeError(
            f"{where}: the checkpoint says it is run {header['run_id']!r}, but the history it carries is that of "
            f"run {started!r} (as its start record says, which its signatures cover); it is not used"
        )
    seal = None
    if "seal" in envelope:
        try:
            seal = seals.read(envelope["seal"], envelope["digest"])
        except seals.SealError as exc:
            raise EnvelopeError(f"{where}: the checkpoint's seal is misshapen ({exc}); it is not used") from None
    return Checkpoint(header, records, seal)


def reference(checkpoint: dict[str, Any]) -> dict[str, Any]:
    """What a cell output carries in place of ``checkpoint`` when the notebook's metadata holds the run."""
    journal = checkpoint.get("journal")
    count = journal.get("count") if isinstance(journal, dict) else None
    return {"run": checkpoint.get("run_id"), "records": count}


def referring(bundle: dict[str, Any]) -> dict[str, Any]:
    """A run output's bundle with its checkpoint replaced by a :func:`reference` to the metadata's copy."""
    shown = {mime: value for mime, value in bundle.items() if mime != MIME_TYPE}
    return {**shown, REF_MIME_TYPE: reference(bundle[MIME_TYPE])}


def is_reference(data: Any) -> bool:
    """Whether a batch entry is a reference (``{"run", "records"}``) rather than a checkpoint."""
    return isinstance(data, dict) and set(data) == {"run", "records"}


def read_reference(data: Any, where: str) -> tuple[str, int]:
    """The run a cell output's reference names and how many of its records the cell shows."""
    if isinstance(data, str) and len(data) <= MAX_REFERENCE_BYTES:  # some front ends save JSON as text
        try:
            data = files.parse_json(data)
        except ValueError:
            data = None
    if (
        not isinstance(data, dict)
        or set(data) != {"run", "records"}
        or not isinstance(data["run"], str)
        or not data["run"]
        or not isinstance(data["records"], int)
        or isinstance(data["records"], bool)
        or data["records"] < 1
    ):
        raise EnvelopeError(f"{where}: the reference to a run in the notebook's metadata is misshapen; it is not used")
    return data["run"], data["records"]


def loads(data: bytes | str, where: str = "checkpoint") -> Checkpoint:
    """The checkpoint the JSON text ``data`` holds, verified (an :class:`EnvelopeError` saying what is wrong)."""
    try:
        envelope = files.parse_json(data, depth=files.DOCUMENT_DEPTH, values=files.document_values(len(data)))
    except files.UnfitJson as exc:
        raise EnvelopeError(f"{where}: {exc} to be a checkpoint") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise EnvelopeError(f"{where}: is not valid JSON ({exc})") from None
    return verify_checkpoint(envelope, where)


def dumps(envelope: dict[str, Any]) -> str:
    return json.dumps(envelope, ensure_ascii=False, separators=(",", ":"), default=str)


def read_file(path: str | Path) -> Checkpoint:
    path = Path(path)
    try:
        data = files.read_bytes(path, files.NOTEBOOK_LIMIT)
    except OSError as exc:
        raise EnvelopeError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    return loads(data, str(path))


def write_private(path: str | Path, text: str) -> None:
    """Replace ``path`` atomically with ``text``, readable by its owner only."""
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        replace_file(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def write_file(path: str | Path, envelope: dict[str, Any]) -> None:
    write_private(path, dumps(envelope))
