"""``{{ path }}`` interpolation, value formatting and untrusted-data fences (LANGUAGE.md §5, §6)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

PLACEHOLDER = re.compile(r"\{\{\s*([\w.]+)\s*\}\}")
VALUE_CAP = 20_000
TRUNCATION_MARK = "…[truncated]"
_MISSING = object()


def lookup(ctx: Mapping[str, Any], path: str) -> Any:
    """Follow a dotted path through dicts only; ``None`` when any part is missing."""
    value: Any = ctx
    for part in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part, _MISSING)
        if value is _MISSING:
            return None
    return value


def _fmt_uncapped(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        # Nested lists are numbered inside their parent item: [["a", "b"]] -> "1. 1. a\n2. b".
        return "\n".join(f"{number}. {_fmt_uncapped(item)}" for number, item in enumerate(value, 1))
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


def fmt(value: Any) -> str:
    """Render a context value as prompt text, capped at 20,000 characters."""
    text = _fmt_uncapped(value)
    if len(text) > VALUE_CAP:
        return text[:VALUE_CAP - len(TRUNCATION_MARK)] + TRUNCATION_MARK
    return text


def placeholders(template: str) -> list[str]:
    return PLACEHOLDER.findall(template)


def root_key(path: str) -> str:
    return path.split(".", 1)[0]


@dataclass(frozen=True)
class Rendered:
    text: str
    fenced: bool  # at least one fence was written: the system message gains the untrusted-data rule
    read_keys: frozenset[str]  # root keys the template read


def fence(value_text: str, nonce: str) -> str:
    return f"<data-{nonce}>\n{value_text}\n</data-{nonce}>"


def render(template: str, ctx: Mapping[str, Any], tainted: Collection[str] = (),
           nonce: Callable[[], str] | str | None = None) -> Rendered:
    """Interpolate ``template`` against ``ctx``.

    Placeholders whose root key is in ``tainted`` are wrapped in a fence whose
    nonce comes from ``nonce`` (called once, only when a fence is needed).
    """
    read: set[str] = set()
    values: list[tuple[re.Match[str], str, bool]] = []
    for match in PLACEHOLDER.finditer(template):
        path = match.group(1)
        root = root_key(path)
        read.add(root)
        values.append((match, fmt(lookup(ctx, path)), root in tainted))
    if not any(is_tainted for _, _, is_tainted in values):
        text = PLACEHOLDER.sub(lambda m: fmt(lookup(ctx, m.group(1))), template) if values else template
        return Rendered(text, False, frozenset(read))
    chosen = nonce() if callable(nonce) else nonce
    if not chosen:
        raise ValueError("a fence nonce is required to render tainted values")
    pieces: list[str] = []
    last = 0
    for match, text, is_tainted in values:
        pieces.append(template[last:match.start()])
        pieces.append(fence(text, chosen) if is_tainted else text)
        last = match.end()
    pieces.append(template[last:])
    return Rendered("".join(pieces), True, frozenset(read))


def fenced_values(template: str, ctx: Mapping[str, Any], tainted: Collection[str]) -> list[str]:
    """The rendered values that would be fenced (a nonce must not occur in any of them)."""
    return [fmt(lookup(ctx, m.group(1))) for m in PLACEHOLDER.finditer(template) if root_key(m.group(1)) in tainted]
