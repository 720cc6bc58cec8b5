"""Journal records: what a run remembers, as plain JSON-able dicts.

Record types (``t``):

- ``start``: run id, root machine name, pinned machines, host values, options and
  the per-run fence secret.
- ``answer``: an oracle answer at a position, with the request fingerprint.
- ``intent``: a non-idempotent tool is about to be called at a position.
- ``invalidated``: a recorded answer no longer matches its request (the machine
  or its input changed); the call is made anew.
- ``suspend`` / ``reply`` / ``resume`` / ``resolve`` / ``finish``.
"""

from __future__ import annotations

import json
from typing import Any

from ..engine.oracle import HumanReply, JudgeAnswer, ProduceAnswer

FORMAT = "mkl-run/1"


def canonical(record: Any) -> str:
    """One stable JSON text per record: what digests and storage use."""
    return json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def encode_answer(kind: str, answer: Any) -> dict[str, Any]:
    if kind == "produce":
        data: dict[str, Any] = {"text": answer.text}
        if answer.reasoning is not None:
            data["reasoning"] = answer.reasoning
        if answer.truncated:
            data["truncated"] = True
        if answer.model:
            data["model"] = answer.model
        return data
    if kind == "judge":
        data = {"choice": answer.choice}
        for key in ("raw", "parse", "model"):
            value = getattr(answer, key)
            if value is not None:
                data[key] = value
        return data
    if kind == "reply":
        return {"value": answer.value, **({"by": answer.by} if answer.by else {})}
    return {"value": answer}


def decode_answer(kind: str, data: dict[str, Any], usage: list[int] | None) -> Any:
    tokens_in, tokens_out = (usage or [0, 0])[:2]
    if kind == "produce":
        return ProduceAnswer(
            text=data["text"],
            reasoning=data.get("reasoning"),
            input_tokens=tokens_in,
            output_tokens=tokens_out,
            truncated=bool(data.get("truncated")),
            model=data.get("model"),
        )
    if kind == "judge":
        return JudgeAnswer(
            choice=data.get("choice"),
            raw=data.get("raw"),
            parse=data.get("parse"),
            input_tokens=tokens_in,
            output_tokens=tokens_out,
            model=data.get("model"),
        )
    if kind == "reply":
        return HumanReply(data.get("value"), by=data.get("by"))
    return data.get("value")
