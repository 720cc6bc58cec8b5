"""Reading a judge model's reply (docs/language.md §9): strict JSON, then a bare number, then the last number."""

from __future__ import annotations

import re

from ..engine.oracle import JudgeAnswer
from ..lang import files

_LAST_NUMBER = re.compile(r"(\d+)(?!.*\d)", re.DOTALL)


def parse_judge_reply(reply: str, conditions: int) -> JudgeAnswer:
    """Turn a judge reply into a 0-based choice among ``conditions`` plus the none option.

    The model numbers options from 1; option ``conditions + 1`` is "none of the
    above".  Anything unreadable, or a number outside 1..conditions+1, is an
    anomaly (``choice`` None) that the engine resolves by its fallback rule.
    """
    text = (reply or "").strip()
    number: int | None = None
    method: str | None = None
    try:
        data = files.parse_json(text)
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("choice"), int) and not isinstance(data["choice"], bool):
        number = data["choice"]
    elif text.isdigit():
        number, method = int(text), "bare"
    else:
        match = _LAST_NUMBER.search(text)
        if match:
            number, method = int(match.group(1)), "last-number"
    if number is None:
        return JudgeAnswer(None, raw=text[:200] or "empty judge reply")
    if not 1 <= number <= conditions + 1:
        return JudgeAnswer(None, raw=f"out-of-range choice {number} for n={conditions + 1}", parse=method)
    return JudgeAnswer(number - 1, parse=method)
