"""What a store remembers of a history it no longer holds (a run forgotten, or started over with ``--fresh``).

A signature proves who made a copy, not that it is the newest. While a store holds a run, an older copy put
back is recognised as a prefix of the history held. Once the store deletes the run, nothing would recognise
it: the older copy would be taken up as new, and a question the forgotten history had answered (a payment
refused, or made) asked again. So a store keeps, per history it drops, the chain digest of each of its
prefixes (never the records: a forgotten run's content is gone) and refuses a copy that shares its start but
stops short of it, or goes another way, as older than what it held.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .chain import chain_start, chain_step

_DIGEST_HEX = 32  # 128 bits of each prefix's chain digest: no copy is ever made to collide with one


@dataclass(frozen=True)
class ForgottenHistory:
    """A history of a run a store held and dropped: how many records it had, its status then, when it was
    dropped, and the chain digest of each of its prefixes (``marks[k]``: the first ``k + 1`` records)."""

    records: int
    status: str
    at: float
    marks: tuple[str, ...]

    def shared(self, records: Sequence[Any]) -> int:
        """How many leading records ``records`` shares with this history."""
        digest = chain_start()
        for index, record in enumerate(records[: len(self.marks)]):
            digest = chain_step(digest, record)
            if digest.hex()[:_DIGEST_HEX] != self.marks[index]:
                return index
        return min(len(records), len(self.marks))

    def outgrown_by(self, records: Sequence[Any]) -> bool:
        """Whether a copy (``records``) holds all this history held: it is not older, so taking it up redoes
        nothing; one that shares none of it is another run of that id, and not held against it."""
        shared = self.shared(records)
        return shared == 0 or shared == self.records

    def encode(self) -> str:
        return json.dumps({"records": self.records, "status": self.status, "at": self.at, "marks": self.marks})


def forgetting(records: Sequence[Any], status: str) -> ForgottenHistory:
    """What to remember of a history (``records``, as a read gives them back) that is being dropped now."""
    marks = []
    digest = chain_start()
    for record in records:
        digest = chain_step(digest, record)
        marks.append(digest.hex()[:_DIGEST_HEX])
    return ForgottenHistory(len(records), status, time.time(), tuple(marks))


def decoded_forgotten(text: str) -> ForgottenHistory | None:
    """A remembered history as the store kept it, or None when the row is not one (it is then not held against
    any copy: a store damaged by hand does not stop a run for good)."""
    try:
        data = json.loads(text)
        marks = data["marks"]
        if not (isinstance(marks, list) and all(isinstance(mark, str) for mark in marks)):
            return None
        return ForgottenHistory(int(data["records"]), str(data["status"]), float(data["at"]), tuple(marks))
    except (ValueError, KeyError, TypeError):
        return None
