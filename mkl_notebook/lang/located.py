"""YAML parsing that remembers where every mapping key and value came from.

PyYAML's composed node graph carries positions; ``yaml.safe_load`` throws them
away.  We walk the node graph ourselves so that every load error and static
finding can name a line and column.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

try:  # libyaml is ~10x faster at composing; fall back to pure Python.
    _Loader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - depends on the PyYAML build
    _Loader = yaml.SafeLoader


@dataclass(frozen=True)
class Where:
    """A 1-based line and column in the source document."""

    line: int
    column: int

    def __str__(self) -> str:
        return f"line {self.line}, column {self.column}"


class LocatedMap(dict):
    """A dict that knows where it starts and where each of its keys sits."""

    where: Where
    key_where: dict[Any, Where]
    duplicate_keys: list[tuple[Any, Where]]

    def at(self, key: Any) -> Where:
        return self.key_where.get(key, self.where)


class LocatedList(list):
    """A list that knows where it and each of its items start."""

    where: Where
    item_where: list[Where]

    def at(self, index: int) -> Where:
        if 0 <= index < len(self.item_where):
            return self.item_where[index]
        return self.where


class YamlSyntaxError(ValueError):
    """The text is not YAML; carries the position PyYAML reported."""

    def __init__(self, problem: str, where: Where | None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.where = where


def _where(node: yaml.Node) -> Where:
    mark = node.start_mark
    return Where(mark.line + 1, mark.column + 1)


_MAX_NODES = 500_000
_MAX_TEXT = 16_000_000  # characters of scalar text, aliases expanded: a machine document is far smaller
_MAX_INT_BITS = 9_965  # about 3000 decimal digits; str() refuses ints over 4300 digits


class _Builder:
    """Turns a composed node graph into plain values with positions attached."""

    def __init__(self) -> None:
        self._scalars = yaml.SafeLoader("")  # only its scalar constructors are used
        self._built = 0
        self._text = 0

    def build(self, node: yaml.Node, depth: int = 0) -> Any:
        self._built += 1
        if self._built > _MAX_NODES:  # aliases can expand exponentially ("billion laughs")
            raise YamlSyntaxError(f"the document expands to more than {_MAX_NODES} values", _where(node))
        if depth > 200:
            raise YamlSyntaxError("the document nests deeper than 200 levels", _where(node))
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, depth)
        if isinstance(node, yaml.SequenceNode):
            items = LocatedList(self.build(child, depth + 1) for child in node.value)
            items.where = _where(node)
            items.item_where = [_where(child) for child in node.value]
            return items
        self._text += len(node.value)
        if self._text > _MAX_TEXT:  # a few aliases of a long string expand to gigabytes
            raise YamlSyntaxError(f"the document expands to more than {_MAX_TEXT:,} characters", _where(node))
        try:
            value = self._scalars.construct_object(node, deep=True)
        except yaml.YAMLError as exc:
            raise YamlSyntaxError(str(getattr(exc, "problem", exc) or exc), _where(node)) from None
        except (ValueError, TypeError, OverflowError) as exc:  # e.g. "2020-13-45" resolves as a timestamp
            problem = f"the value {_short(node.value)!r} cannot be read ({str(exc)[:80]})"
            raise YamlSyntaxError(problem, _where(node)) from None
        if isinstance(value, int) and value.bit_length() > _MAX_INT_BITS:
            raise YamlSyntaxError("a number has more than 3000 digits", _where(node))
        return value

    def _mapping(self, node: yaml.MappingNode, depth: int) -> LocatedMap:
        result = LocatedMap()
        result.where = _where(node)
        result.key_where = {}
        result.duplicate_keys = []
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise YamlSyntaxError("merge keys ('<<') are not supported", _where(key_node))
            key = self.build(key_node, depth + 1)
            if isinstance(key, (dict, list)):
                raise YamlSyntaxError("a mapping key must be a plain value", _where(key_node))
            if key in result.key_where:
                result.duplicate_keys.append((key, _where(key_node)))
            result[key] = self.build(value_node, depth + 1)
            result.key_where[key] = _where(key_node)
        return result


def _short(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _offset_where(text: str, offset: int) -> Where:
    before = text[:offset]
    return Where(before.count("\n") + 1, offset - (before.rfind("\n") + 1) + 1)


def parse_located(text: str) -> Any:
    """Parse one YAML document, returning plain values with positions attached.

    Raises :class:`YamlSyntaxError` with a position for anything PyYAML rejects.
    """
    try:
        node = yaml.compose(text, Loader=_Loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = Where(mark.line + 1, mark.column + 1) if mark else None
        problem = exc.problem or exc.context or "invalid YAML"
        raise YamlSyntaxError(problem, where) from None
    except yaml.YAMLError as exc:
        raise YamlSyntaxError(str(exc) or "invalid YAML", None) from None
    except RecursionError:
        raise YamlSyntaxError("the document nests too deeply", None) from None
    except UnicodeEncodeError as exc:  # lone surrogates cannot be handed to libyaml
        raise YamlSyntaxError(
            "the text contains an invalid character (a lone surrogate)", _offset_where(text, exc.start)
        ) from None
    if node is None:
        return None
    try:
        return _Builder().build(node)
    except RecursionError:
        raise YamlSyntaxError("the document nests too deeply", None) from None


def plain(value: Any) -> Any:
    """A deep copy of ``value`` as ordinary dicts and lists (no positions)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value
