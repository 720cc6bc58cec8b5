"""``{{ path }}`` interpolation, value formatting and untrusted-data fences (LANGUAGE.md §5, §6)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

PLACEHOLDER = re.compile(r"\{\{\s*([\w.]+)\s*\}\}")
VALUE_CAP = 20_000
TRUNCATION_MARK = "…[truncated]"


def lookup(ctx: Mapping[str, Any], path: str) -> Any:
    """Follow a dotted path through dicts only; ``None`` when any part is missing."""
    return _value_at(ctx, path.split("."))


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
    text = _fmt_uncapped(value)
    if len(text) > VALUE_CAP:
        return text[: VALUE_CAP - len(TRUNCATION_MARK)] + TRUNCATION_MARK
    return text


def root_key(path: str) -> str:
    return path.split(".", 1)[0]


@dataclass(frozen=True, slots=True)
class Rendered:
    text: str
    fenced: bool  # at least one fence was written: the system message gains the untrusted-data rule
    read_keys: frozenset[str]  # root keys the template read


@dataclass(frozen=True, slots=True)
class Template:
    """A template split once into its literal pieces and its placeholders, to render many times."""

    text: str
    literals: tuple[str, ...]  # one more than there are placeholders
    paths: tuple[tuple[str, ...], ...]  # each placeholder's dotted path, split
    read_keys: frozenset[str]  # the root keys the placeholders read


def compile_template(text: str) -> Template:
    literals: list[str] = []
    paths: list[tuple[str, ...]] = []
    last = 0
    for match in PLACEHOLDER.finditer(text):
        literals.append(text[last : match.start()])
        paths.append(tuple(match.group(1).split(".")))
        last = match.end()
    literals.append(text[last:])
    return Template(text, tuple(literals), tuple(paths), frozenset(path[0] for path in paths))


def _value_at(ctx: Mapping[str, Any], parts: Sequence[str]) -> Any:
    value: Any = ctx
    for part in parts:
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
        if value is None:
            return None
    return value


def render(
    template: str | Template,
    ctx: Mapping[str, Any],
    tainted: Collection[str] = (),
    nonce: Callable[[list[str]], str] | None = None,
) -> Rendered:
    """Interpolate ``template`` against ``ctx``.

    Placeholders whose root key is in ``tainted`` are wrapped in a fence. The nonce
    comes from ``nonce``, called once with the texts to be fenced (a nonce must not
    occur in any of them), and only when a fence is needed.
    """
    compiled = template if isinstance(template, Template) else compile_template(template)
    texts = [fmt(_value_at(ctx, path)) for path in compiled.paths]
    fenced = [path[0] in tainted for path in compiled.paths]
    chosen = ""
    any_fence = any(fenced)
    if any_fence:
        if nonce is None:
            raise ValueError("a fence nonce is required to render tainted values")
        chosen = nonce([text for text, fence in zip(texts, fenced, strict=True) if fence])
    pieces = [compiled.literals[0]]
    for text, fence, literal in zip(texts, fenced, compiled.literals[1:], strict=True):
        pieces.append(f"<data-{chosen}>\n{text}\n</data-{chosen}>" if fence else text)
        pieces.append(literal)
    return Rendered("".join(pieces), any_fence, compiled.read_keys)
