"""The types the front ends name, from the layers that define them: a front end imports only ``app`` and
``render``, and these are the words it needs to speak of machines, runs and outcomes."""

from __future__ import annotations

from ..checkpoints.seals import Signer
from ..durable.places import Place
from ..durable.runs import Observer, Outcome, Resolution, new_run_id
from ..durable.stores import DEFAULT_STORE
from ..engine.oracle import Oracle
from ..engine.result import RunResult
from ..lang.findings import Finding
from ..lang.model import TIERS, Machine

__all__ = [
    "DEFAULT_STORE",
    "TIERS",
    "Finding",
    "Machine",
    "Observer",
    "Oracle",
    "Outcome",
    "Place",
    "Resolution",
    "RunResult",
    "Signer",
    "new_run_id",
]
