"""``{{ path }}`` interpolation, value formatting and untrusted-data fences (docs/language.md §5, §6)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, NamedTuple

PLACEHOLDER = re.compile(r"\{\{\s*([\w.]+)\s*\}\}")
WHOLE_PLACEHOLDER = re.compile(r"^\s*\{\{\s*([\w.]+)\s*\}\}\s*$")  # a value that is one placeholder only
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
    text = value if isinstance(value, str) else _fmt_uncapped(value)
    if len(text) > VALUE_CAP:
        return text[: VALUE_CAP - len(TRUNCATION_MARK)] + TRUNCATION_MARK
    return text


def root_key(path: str) -> str:
    return path.split(".", 1)[0]


class Rendered(NamedTuple):
    text: str
    fenced: bool  # at least one fence was written: the system message gains the untrusted-data rule
    read_keys: frozenset[str]  # root keys the template read


class Template(NamedTuple):
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
        if not isinstance(value, dict) and not isinstance(value, Mapping):  # dict first: it skips the ABC's check
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
    if not compiled.paths:
        return Rendered(compiled.text, False, compiled.read_keys)
    texts = []
    to_fence = []
    for path in compiled.paths:
        text = fmt(_value_at(ctx, path))
        texts.append(text)
        if path[0] in tainted:
            to_fence.append(text)
    if not to_fence:
        pieces = [compiled.literals[0]]
        for text, literal in zip(texts, compiled.literals[1:], strict=True):
            pieces += (text, literal)
        return Rendered("".join(pieces), False, compiled.read_keys)
    if nonce is None:
        raise ValueError("a fence nonce is required to render tainted values")
    fence = nonce(to_fence)
    pieces = [compiled.literals[0]]
    for text, path, literal in zip(texts, compiled.paths, compiled.literals[1:], strict=True):
        pieces += (f"<data-{fence}>\n{text}\n</data-{fence}>" if path[0] in tainted else text, literal)
    return Rendered("".join(pieces), True, compiled.read_keys)
