"""YAML parsing that remembers where every mapping key and value came from.

``yaml.safe_load`` throws positions away, so we build the values ourselves and keep, for every
mapping key and list item, the line and column it starts at; every load error and static finding
can then name them.

Most documents are built straight from libyaml's parser events: one pass, no node graph, and a
Python constructor called only for the rare scalar that is not text.  A document with anchors or
aliases (where one node is reached from several places) is built from the node graph PyYAML
composes instead; both ways give the same values, positions and errors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml
from yaml.events import (
    AliasEvent,
    DocumentEndEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)

from ..errors import MklError
from .yaml_words import yaml_problem_in_words

try:  # libyaml is ~10x faster at parsing; fall back to pure Python.
    _Loader: type[yaml.CSafeLoader] | type[yaml.SafeLoader] = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - depends on the PyYAML build
    _Loader = yaml.SafeLoader

Position = tuple[int, int]  # a 1-based line and column, kept as a pair until a message needs a Where

_STR = "tag:yaml.org,2002:str"
_MERGE = "tag:yaml.org,2002:merge"


@dataclass(frozen=True)
class Where:
    """A 1-based line and column in the source document."""

    line: int
    column: int

    def __str__(self) -> str:
        return f"line {self.line}, column {self.column}"


class LocatedMap(dict[str, Any]):
    """A dict that knows where it starts and where each of its keys sits."""

    __slots__ = ("duplicate_keys", "key_positions", "position")
    position: Position
    key_positions: dict[Any, Position]
    duplicate_keys: list[tuple[Any, Position]]

    @property
    def where(self) -> Where:
        return Where(*self.position)

    def at(self, key: Any) -> Where:
        return Where(*self.key_positions.get(key, self.position))


class LocatedList(list[Any]):
    """A list that knows where it and each of its items start."""

    __slots__ = ("item_positions", "position")
    position: Position
    item_positions: list[Position]

    @property
    def where(self) -> Where:
        return Where(*self.position)

    def at(self, index: int) -> Where:
        if 0 <= index < len(self.item_positions):
            return Where(*self.item_positions[index])
        return self.where


def _new_map(position: Position) -> LocatedMap:
    result = LocatedMap()
    result.position = position
    result.key_positions = {}
    result.duplicate_keys = []
    return result


def _new_list(position: Position) -> LocatedList:
    result = LocatedList()
    result.position = position
    result.item_positions = []
    return result


class YamlSyntaxError(MklError, ValueError):
    """The text is not YAML; carries the position PyYAML reported."""

    def __init__(self, problem: str, where: Where | None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.where = where


def _position(mark: Any) -> Position:
    return (mark.line + 1, mark.column + 1)


def _within_bounds(built: int, depth: int, mark: Any) -> None:
    """Refuse a document past the value count or the depth any machine needs (at the value that went past)."""
    if built > _MAX_NODES:
        raise _error(f"the document expands to more than {_MAX_NODES} values", mark)
    if depth > _MAX_DEPTH:
        raise _error(f"the document nests deeper than {_MAX_DEPTH} levels", mark)


def _error(problem: str, mark: Any) -> YamlSyntaxError:
    return YamlSyntaxError(problem, Where(*_position(mark)))


_MAX_NODES = 500_000
_MAX_TEXT = 16_000_000  # characters of scalar text, aliases expanded: a machine document is far smaller
_MAX_INT_BITS = 9_965  # about 3000 decimal digits; str() refuses ints over 4300 digits
_MAX_DEPTH = 200


class _Scalars:
    """Builds the values of scalars that are not plain text, with PyYAML's own safe constructors."""

    def __init__(self) -> None:
        self._constructor: yaml.SafeLoader | None = None

    def build(self, node: yaml.ScalarNode) -> Any:
        if self._constructor is None:
            self._constructor = yaml.SafeLoader("")  # only its scalar constructors are used
        try:
            built = self._constructor.construct_object(node, deep=True)
        except yaml.YAMLError as exc:
            raise _error(str(getattr(exc, "problem", exc) or exc), node.start_mark) from None
        except (ValueError, TypeError, OverflowError) as exc:  # e.g. "2020-13-45" resolves as a timestamp
            problem = f"the value {_short(node.value)!r} cannot be read ({str(exc)[:80]})"
            raise _error(problem, node.start_mark) from None
        if isinstance(built, int) and built.bit_length() > _MAX_INT_BITS:
            raise _error("a number has more than 3000 digits", node.start_mark)
        return built


class _NodeBuilder:
    """Turns a composed node graph into plain values with positions attached (aliases expanded)."""

    def __init__(self) -> None:
        self._scalars = _Scalars()
        self._built = 0
        self._text = 0

    def build(self, node: yaml.Node, depth: int = 0) -> Any:
        self._built += 1
        if self._built > _MAX_NODES:  # aliases can expand exponentially ("billion laughs")
            raise _error(f"the document expands to more than {_MAX_NODES} values", node.start_mark)
        if depth > _MAX_DEPTH:
            raise _error(f"the document nests deeper than {_MAX_DEPTH} levels", node.start_mark)
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, depth)
        if not isinstance(node, yaml.ScalarNode):
            items = _new_list(_position(node.start_mark))
            items.extend(self.build(child, depth + 1) for child in node.value)
            items.item_positions = [_position(child.start_mark) for child in node.value]
            return items
        self._text += len(node.value)
        if self._text > _MAX_TEXT:  # a few aliases of a long string expand to gigabytes
            raise _error(f"the document expands to more than {_MAX_TEXT:,} characters", node.start_mark)
        if node.tag == _STR:
            return node.value
        return self._scalars.build(node)

    def _mapping(self, node: yaml.MappingNode, depth: int) -> LocatedMap:
        result = _new_map(_position(node.start_mark))
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE:
                raise _error("merge keys ('<<') are not supported", key_node.start_mark)
            key = self.build(key_node, depth + 1)
            if isinstance(key, (dict, list)):
                raise _error("a mapping key must be a plain value", key_node.start_mark)
            if key in result.key_positions:
                result.duplicate_keys.append((key, _position(key_node.start_mark)))
            result[key] = self.build(value_node, depth + 1)
            result.key_positions[key] = _position(key_node.start_mark)
        return result


class _NeedsNodes(MklError):
    """The document holds what only the node graph builds faithfully: an anchor, an alias, a second document."""


_NO_KEY = object()  # an open mapping waiting for its next key


class _EventBuilder:
    """Builds the located values of one document straight from the parser's events.

    Its checks and their order are those of :class:`_NodeBuilder`, which runs only once the whole
    document has composed; so a problem found here is held until the parser has read the rest, and
    a syntax error further on is reported first, as before.
    """

    def __init__(self, parser: Any) -> None:
        self._parser = parser
        self._scalars = _Scalars()

    def build(self) -> Any:
        get = self._parser.get_event
        get()  # the stream starts
        if type(get()) is StreamEndEvent:  # the document-start event, or the end of an empty stream
            return None
        try:
            root = self._document(get)
        except YamlSyntaxError as problem:
            self._rest_of_document(get)
            raise problem from None
        if type(get()) is not StreamEndEvent:
            raise _NeedsNodes
        return root

    def _rest_of_document(self, get: Any) -> None:
        while True:
            event = get()
            kind = type(event)
            if kind is DocumentEndEvent:
                break
            if kind is AliasEvent or getattr(event, "anchor", None) is not None:
                raise _NeedsNodes
        if type(get()) is not StreamEndEvent:
            raise _NeedsNodes

    def _document(self, get: Any) -> Any:
        resolve = self._parser.resolve
        tags: dict[str, str] = {}  # the tag each plain scalar's text resolves to, worked out once per text
        built = text = depth = 0
        root: Any = None
        parents: list[tuple[Any, Any, Any, Any]] = []
        container: Any = None  # the innermost open mapping or list; None at the document's root
        positions: Any = None  # its key_positions or item_positions
        in_map = False
        key: Any = _NO_KEY
        key_position: Position = (0, 0)
        while True:
            event = get()
            kind = type(event)
            position: Position | None = None
            if kind is ScalarEvent:
                if event.anchor is not None:
                    raise _NeedsNodes
                value = event.value
                tag = event.tag
                if tag is None or tag == "!":
                    implicit = event.implicit
                    if implicit[0]:
                        tag = tags.get(value)
                        if tag is None:
                            tag = tags[value] = resolve(yaml.ScalarNode, value, implicit)
                    else:
                        tag = resolve(yaml.ScalarNode, value, implicit)
                if tag == _MERGE and in_map and key is _NO_KEY:
                    raise _error("merge keys ('<<') are not supported", event.start_mark)
                built += 1
                _within_bounds(built, depth, event.start_mark)
                text += len(value)
                if text > _MAX_TEXT:
                    raise _error(f"the document expands to more than {_MAX_TEXT:,} characters", event.start_mark)
                if tag != _STR:
                    node = yaml.ScalarNode(tag, value, event.start_mark, event.end_mark, event.style)
                    value = self._scalars.build(node)
            elif kind is MappingStartEvent or kind is SequenceStartEvent:
                if event.anchor is not None:
                    raise _NeedsNodes
                if event.tag == _MERGE and in_map and key is _NO_KEY:
                    raise _error("merge keys ('<<') are not supported", event.start_mark)
                built += 1
                _within_bounds(built, depth, event.start_mark)
                depth += 1
                parents.append((container, in_map, key, key_position))
                in_map = kind is MappingStartEvent
                container = _new_map(_position(event.start_mark)) if in_map else _new_list(_position(event.start_mark))
                positions = container.key_positions if in_map else container.item_positions
                key = _NO_KEY
                continue
            elif kind is MappingEndEvent or kind is SequenceEndEvent:
                value = container
                position = container.position
                depth -= 1
                container, in_map, key, key_position = parents.pop()
                if container is not None:
                    positions = container.key_positions if in_map else container.item_positions
            elif kind is AliasEvent:
                raise _NeedsNodes
            else:  # the document ends
                return root
            # A value is complete: it is the root, a mapping's key or value, or a list's item.
            if container is None:
                root = value
            elif in_map and key is _NO_KEY:
                if position is not None:  # a mapping or a list as a key
                    raise YamlSyntaxError("a mapping key must be a plain value", Where(*position))
                key, key_position = value, _position(event.start_mark)
            elif in_map:
                if key in positions:
                    container.duplicate_keys.append((key, key_position))
                container[key] = value
                positions[key] = key_position
                key = _NO_KEY
            else:
                container.append(value)
                positions.append(position or _position(event.start_mark))


def _short(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _offset_where(text: str, offset: int) -> Where:
    before = text[:offset]
    return Where(before.count("\n") + 1, offset - (before.rfind("\n") + 1) + 1)


def _parsed(text: str, build: Any) -> Any:
    """``build(parser)`` with the parser's own complaints turned into :class:`YamlSyntaxError`."""
    parser = None
    try:
        parser = _Loader(text)
        return build(parser)
    except yaml.MarkedYAMLError as exc:
        marks = [_position(mark) if mark is not None else None for mark in (exc.problem_mark, exc.context_mark)]
        problem, at = yaml_problem_in_words(exc.problem or "", marks[0], exc.context, marks[1], text)
        at = at or marks[0] or marks[1]
        raise YamlSyntaxError(problem or exc.context or "invalid YAML", Where(*at) if at else None) from None
    except yaml.YAMLError as exc:
        raise YamlSyntaxError(str(exc) or "invalid YAML", None) from None
    except RecursionError:
        raise YamlSyntaxError("the document nests too deeply", None) from None
    except UnicodeEncodeError as exc:  # lone surrogates cannot be handed to libyaml
        raise YamlSyntaxError(
            "the text contains an invalid character (a lone surrogate)", _offset_where(text, exc.start)
        ) from None
    finally:
        if parser is not None:
            parser.dispose()


def _from_nodes(parser: Any) -> Any:
    node = parser.get_single_node()
    if node is None:
        return None
    try:
        return _NodeBuilder().build(node)
    except RecursionError:
        raise YamlSyntaxError("the document nests too deeply", None) from None


def parse_located(text: str, first_line: int = 1) -> Any:
    """Parse one YAML document, returning plain values with positions attached.

    ``first_line`` is the line number the text's first line has where the person sees it (a ``%%mkl`` cell's
    body starts on the cell's second line). Raises :class:`YamlSyntaxError` with a position for anything
    PyYAML rejects.
    """
    try:
        if not _Loader.yaml_path_resolvers:  # a path resolver needs the node graph's descent; SafeLoader has none
            try:
                return _shifted(_parsed(text, lambda parser: _EventBuilder(parser).build()), first_line - 1)
            except _NeedsNodes:
                pass
        return _shifted(_parsed(text, _from_nodes), first_line - 1)
    except YamlSyntaxError as exc:
        if first_line == 1 or exc.where is None:
            raise
        raise YamlSyntaxError(exc.problem, Where(exc.where.line + first_line - 1, exc.where.column)) from None


def _shifted(value: Any, lines: int) -> Any:
    """``value`` with every position it holds moved down by ``lines`` lines (in place; shared values once)."""
    if not lines:
        return value
    seen: set[int] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if not isinstance(item, (LocatedMap, LocatedList)) or id(item) in seen:
            continue
        seen.add(id(item))
        item.position = (item.position[0] + lines, item.position[1])
        if isinstance(item, LocatedMap):
            item.key_positions = {key: (line + lines, column) for key, (line, column) in item.key_positions.items()}
            item.duplicate_keys = [(key, (line + lines, column)) for key, (line, column) in item.duplicate_keys]
            stack.extend(item.values())
        else:
            item.item_positions = [(line + lines, column) for line, column in item.item_positions]
            stack.extend(item)
    return value


def parse_plain(text: str) -> Any:
    """One YAML document as plain values, as ``yaml.safe_load`` reads it, but parsed by libyaml when PyYAML
    has it (several times faster than the pure-Python parser ``safe_load`` uses).

    Raises what ``yaml.safe_load`` raises: :class:`yaml.YAMLError` for text that is not YAML.
    """
    try:
        loaded = yaml.load(text, Loader=_Loader)  # a safe loader: CSafeLoader, else SafeLoader
    except UnicodeEncodeError:  # a lone surrogate, which libyaml cannot be handed: PyYAML's own reader refuses it
        loaded = yaml.load(text, Loader=yaml.SafeLoader)
    if "&" in text:  # only anchors let a value be reached from several places
        _expands_within_bounds(loaded)
    return loaded


def _expands_within_bounds(value: Any) -> None:
    """Refuse (:class:`yaml.YAMLError`) a loaded document whose aliases expand past the bounds of a located one,
    as writing it out as JSON (a journal record) would: each shared value is sized once, whatever it repeats."""
    sizes: dict[int, tuple[int, int]] = {}  # id of a list or mapping -> values and characters it expands to
    stack: list[tuple[Any, bool]] = [(value, False)]
    while stack:
        item, children_sized = stack.pop()
        if not isinstance(item, (list, dict)) or (id(item) in sizes and not children_sized):
            continue
        children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
        if not children_sized:
            sizes[id(item)] = (-1, -1)  # being sized: met again below it, it contains itself
            stack.append((item, True))
            stack.extend((child, False) for child in children)
            continue
        count, text = 1, 0
        for child in children:
            if isinstance(child, (list, dict)):
                inner = sizes[id(child)]
                if inner[0] < 0:
                    raise yaml.YAMLError("the document contains itself (an alias inside its own anchor)")
                count, text = count + inner[0], text + inner[1]
            else:
                count, text = count + 1, text + (len(child) if isinstance(child, str) else 1)
        if count > _MAX_NODES:
            raise yaml.YAMLError(f"the document expands to more than {_MAX_NODES} values")
        if text > _MAX_TEXT:
            raise yaml.YAMLError(f"the document expands to more than {_MAX_TEXT:,} characters")
        sizes[id(item)] = (count, text)


def plain(value: Any) -> Any:
    """A deep copy of ``value`` as ordinary dicts and lists (no positions)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value
