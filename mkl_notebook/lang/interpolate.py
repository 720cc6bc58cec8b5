"""``{{ path }}`` interpolation, value formatting and untrusted-data fences (LANGUAGE.md §5, §6)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

PLACEHOLDER = re.compile(r"\{\{\s*([\w.]+)\s*\}\}")
VALUE_CAP = 20_000
TRUNCATION_MARK = "…[truncated]"


def lookup(ctx: Mapping[str, Any], path: str) -> Any:
    """Follow a dotted path through dicts only; ``None`` when any part is missing."""
    return _value_at(ctx, tuple(path.split(".")))


def set_path(target: dict[str, Any], path: str, value: Any) -> None:
    """Write ``value`` at a dotted path, creating (or replacing non-mapping) intermediate levels."""
    parts = path.split(".")
    for part in parts[:-1]:
        nested = target.get(part)
        if not isinstance(nested, dict):
            nested = {}
            target[part] = nested
        target = nested
    target[parts[-1]] = value


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
    if type(value) is str and len(value) <= VALUE_CAP:
        return value
    text = _fmt_uncapped(value)
    if len(text) > VALUE_CAP:
        return text[: VALUE_CAP - len(TRUNCATION_MARK)] + TRUNCATION_MARK
    return text


def root_key(path: str) -> str:
    return path.split(".", 1)[0]


@dataclass(slots=True)
class Rendered:
    text: str
    fenced: bool  # at least one fence was written: the system message gains the untrusted-data rule
    read_keys: frozenset[str]  # root keys the template read


@lru_cache(maxsize=8192)
def compile_template(template: str) -> tuple[tuple[str, ...], tuple[tuple[tuple[str, ...], str], ...], frozenset[str]]:
    """A template as its literal pieces, its placeholders ``(path parts, root key)`` and the root keys it reads."""
    literals: list[str] = []
    slots: list[tuple[tuple[str, ...], str]] = []
    last = 0
    for match in PLACEHOLDER.finditer(template):
        literals.append(template[last : match.start()])
        parts = tuple(match.group(1).split("."))
        slots.append((parts, parts[0]))
        last = match.end()
    literals.append(template[last:])
    return tuple(literals), tuple(slots), frozenset(root for _, root in slots)


def _value_at(ctx: Mapping[str, Any], parts: tuple[str, ...]) -> Any:
    value: Any = ctx
    for part in parts:
        if type(value) is not dict and not isinstance(value, Mapping):  # dict first: the ABC check is slow
            return None
        value = value.get(part)
        if value is None:
            return None
    return value


Template = tuple[tuple[str, ...], tuple[tuple[tuple[str, ...], str], ...], frozenset[str]]


def render(
    template: str,
    ctx: Mapping[str, Any],
    tainted: Collection[str] = (),
    nonce: Callable[[list[str]], str] | str | None = None,
) -> Rendered:
    """Interpolate ``template`` against ``ctx``.

    Placeholders whose root key is in ``tainted`` are wrapped in a fence. The
    nonce comes from ``nonce``, called once with the texts to be fenced (a nonce
    must not occur in any of them), only when a fence is needed.
    """
    by_values = (lambda _position, values: nonce(values)) if callable(nonce) else nonce
    return Rendered(*render_compiled(compile_template(template), template, ctx, tainted, by_values))


def render_compiled(
    compiled: Template,
    template: str,
    ctx: Mapping[str, Any],
    tainted: Collection[str] = (),
    nonce: Callable[[str, list[str]], str] | str | None = None,
    position: str = "",
) -> tuple[str, bool, frozenset[str]]:
    """:func:`render` for a template already passed through :func:`compile_template`, as a plain
    ``(text, fenced, read_keys)`` tuple: the engine renders a prompt on every step.

    A callable ``nonce`` is called as ``nonce(position, texts_to_fence)``, so a caller
    need not bind the call's position into a new callable for every prompt.
    """
    literals, slots, read = compiled
    if not slots:
        return template, False, read
    plain_dict = type(ctx) is dict
    texts: list[str] = []
    to_fence: list[str] = []
    for parts, root in slots:  # written out, not comprehensions: this runs for every prompt of every step
        value = ctx.get(root) if plain_dict and len(parts) == 1 else _value_at(ctx, parts)
        text = value if type(value) is str and len(value) <= VALUE_CAP else fmt(value)
        texts.append(text)
        if root in tainted:
            to_fence.append(text)
    if not to_fence:
        if len(texts) == 1:
            return literals[0] + texts[0] + literals[1], False, read
        pieces = [literals[0]]
        for index, text in enumerate(texts, 1):
            pieces += (text, literals[index])
        return "".join(pieces), False, read
    chosen = nonce(position, to_fence) if callable(nonce) else nonce
    if not chosen:
        raise ValueError("a fence nonce is required to render tainted values")
    if len(texts) == 1:
        return f"{literals[0]}<data-{chosen}>\n{texts[0]}\n</data-{chosen}>{literals[1]}", True, read
    pieces = [literals[0]]
    for index, text in enumerate(texts, 1):
        root = slots[index - 1][1]
        pieces += (f"<data-{chosen}>\n{text}\n</data-{chosen}>" if root in tainted else text, literals[index])
    return "".join(pieces), True, read
