"""PyYAML's complaints about text that is not YAML, said in plain words at the place the person must fix.

PyYAML (libyaml or the pure-Python parser, whose wording differs) names the token it choked on ("did not
find expected key", "mapping values are not allowed here"); a newcomer needs the mistake behind it: a tab,
a line indented unlike its neighbours, a quote or bracket never closed, a missing ``:``.  Each rule below
reads the problem and context marks with the text around them; what no rule knows keeps PyYAML's words.
"""

from __future__ import annotations

from typing import Any

Mark = tuple[int, int]  # 1-based line and column


def yaml_problem_in_words(
    problem: str, problem_mark: Mark | None, context: str | None, context_mark: Mark | None, text: str
) -> tuple[str, Mark | None]:
    """The sentence that says what is wrong, and the line and column to show it at."""
    lines = text.splitlines()
    said = (problem or "").lower()
    about = (context or "").lower()
    at = _char(lines, problem_mark)
    if problem_mark is not None and (at == "\t" or "tab" in said):
        return _tab(lines, problem_mark), problem_mark
    if "quoted scalar" in about and "end of stream" in said and context_mark is not None:
        quote = _char(lines, context_mark) or '"'
        return f"the text opened with {quote} here is never closed: end it with a matching {quote}", context_mark
    if "unknown escape" in said:
        return (
            "unknown escape sequence in double-quoted text: write \\\\ for a backslash, or put the text in "
            "single quotes",
            problem_mark,
        )
    for opened, closed, what in (("flow sequence", "]", "list"), ("flow mapping", "}", "mapping")):
        if opened in about and context_mark is not None:
            start = "[" if closed == "]" else "{"
            return (
                f"the {what} opened with '{start}' here is not closed: add '{closed}' after its last item "
                f"(and ',' between items)",
                context_mark,
            )
    if "cannot start any token" in said and at:
        return f"a value cannot start with '{at}': put the whole value in quotes", problem_mark
    if "undefined alias" in said:
        return "'*' starts a reference to an '&' anchor, and none has that name: put the value in quotes", problem_mark
    if "mapping values are not allowed" in said and problem_mark is not None:
        return _stray_colon(lines, problem_mark)
    if "simple key" in about and context_mark is not None:
        return f"{_quoted_line(lines, context_mark[0])} has no ':' after its key; write it as key: value", context_mark
    if "block collection" in about and problem_mark is not None and context_mark is not None:
        return (
            f"this line is indented unlike the list above it: each item of the list that starts at line "
            f"{context_mark[0]} begins with '- ' at column {context_mark[1]}",
            problem_mark,
        )
    if "block mapping" in about and problem_mark is not None and context_mark is not None:
        return _misplaced_in_mapping(lines, problem_mark, context_mark, at)
    return problem or "this is not YAML", problem_mark


def _char(lines: list[str], mark: Mark | None) -> str:
    if mark is None or not 1 <= mark[0] <= len(lines):
        return ""
    line = lines[mark[0] - 1]
    return line[mark[1] - 1] if 1 <= mark[1] <= len(line) else ""


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _quoted_line(lines: list[str], number: int) -> str:
    shown = lines[number - 1].strip() if 1 <= number <= len(lines) else ""
    return f"'{shown[:40]}{'…' if len(shown) > 40 else ''}'"


def _tab(lines: list[str], mark: Mark) -> str:
    line = lines[mark[0] - 1] if 1 <= mark[0] <= len(lines) else ""
    if "\t" in line[: _indent(line.replace("\t", " "))]:
        return "a tab indents this line; YAML indents with spaces only: replace the tab with spaces"
    return "a tab where YAML expects spaces: replace the tab with spaces"


def _previous(lines: list[str], number: int) -> int | None:
    """The number of the nearest line above ``number`` that holds something (not blank, not a comment)."""
    for candidate in range(number - 1, 0, -1):
        stripped = lines[candidate - 1].strip()
        if stripped and not stripped.startswith("#"):
            return candidate
    return None


def _stray_colon(lines: list[str], mark: Mark) -> tuple[str, Mark | None]:
    """A ``:`` where no key can start: the line above lacks its ``:`` or a space after it, this line is
    indented too deep, or a value holds ``: `` unquoted."""
    line = lines[mark[0] - 1] if 1 <= mark[0] <= len(lines) else ""
    before = line[: mark[1] - 1]
    if ": " in before.strip():
        return "this value holds ': ', which YAML reads as a second key: put the whole value in quotes", mark
    above = _previous(lines, mark[0])
    if above is not None:
        previous = lines[above - 1].strip().lstrip("- ")
        if ":" not in previous:
            return (
                f"{_quoted_line(lines, above)} has no ':' after its key; write it as key: value",
                (above, _indent(lines[above - 1]) + 1),
            )
        if ": " not in previous and not previous.endswith(":"):
            return (
                f"{_quoted_line(lines, above)} needs a space after its ':'; write it as key: value",
                (above, lines[above - 1].index(":") + 1),
            )
        if _indent(line) > _indent(lines[above - 1]):
            return (
                f"this line is indented deeper than line {above}, whose key already has a value: "
                "indent it like the keys above it",
                (mark[0], _indent(line) + 1),
            )
    return "a ':' where no key can start: put the value in quotes if the ':' is part of it", mark


def _unclosed_quote_above(lines: list[str], mark: Mark) -> Mark | None:
    """Where a quoted text opened on an earlier line when the quote just before ``mark`` is what closed it."""
    before = lines[mark[0] - 1][: mark[1] - 1].rstrip()
    quote = before[-1:] if before[-1:] in ('"', "'") else ""
    if not quote or before.count(quote) % 2 == 0:  # the quote is closed on its own line
        return None
    for number in range(mark[0] - 1, 0, -1):
        text = lines[number - 1]
        if text.count(quote) % 2:
            return number, text.rindex(quote) + 1
    return None


def _misplaced_in_mapping(lines: list[str], mark: Mark, context: Mark, at: str) -> tuple[str, Any]:
    """Something other than a key where a mapping (which starts at ``context``) expects its next key."""
    line = lines[mark[0] - 1] if 1 <= mark[0] <= len(lines) else ""
    if at == "-" and mark[1] == _indent(line) + 1:
        return (
            f"a list item where the mapping that starts at line {context[0]} expects a key: indent it under a "
            "key (key: then the items below it)",
            mark,
        )
    if mark[1] > _indent(line) + 1:  # not at the start of its line: something follows a complete value
        opened = _unclosed_quote_above(lines, mark)
        if opened is not None:
            quote = _char(lines, opened)
            return (
                f"the text opened with {quote} here is not closed on its line, so it runs on to the {quote} of "
                f"line {mark[0]}: end it with a matching {quote}",
                opened,
            )
        return f"unexpected '{at}' after the value: put the whole value in quotes, or remove it", mark
    # The line matches no key's indentation: the keys just above it (a nested mapping that ended) or those of
    # the mapping that is still open (PyYAML's context) are what it was meant to line up with.
    here = f"this line is indented by {mark[1] - 1} spaces, like no key above it"
    ways = [(context[1] - 1, context[0])]
    above = _previous(lines, mark[0])
    if above is not None and _indent(lines[above - 1]) not in (context[1] - 1, mark[1] - 1):
        ways.insert(0, (_indent(lines[above - 1]), above))
    said = " or ".join(f"by {spaces} like line {number}" for spaces, number in ways)
    return f"{here}: indent it {said}", mark
