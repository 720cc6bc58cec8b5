"""Sphinx directives that write the reference of every ``mkl`` command and ``%mkl`` magic from their real parsers.

Both front ends build their parsers from one flag table (:mod:`mkl_notebook.app.flags`): the command line's
(:func:`mkl_notebook.cli.build_parser`) and the magics' (:func:`mkl_notebook.notebook.magic_args.parsers`, with the
``%mkl help`` text beside them). These directives walk those parsers when the docs are built, so a flag added to
the table, or a help text changed there, reaches the reference with no page edited; ``tests/test_docs.py`` holds
the built pages to the parsers.

In a MyST page::

    ```{mkl-commands}
    ```

    ```{mkl-magics}
    ```
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.util.docutils import SphinxDirective

USAGE_WIDTH = 78  # usage lines are wrapped at this width (the page's), whatever terminal builds the docs


@dataclass(frozen=True)
class Option:
    """One argument of a parser: how it is written, what it means, and what argparse adds (default, choices)."""

    spelling: str
    help: str
    details: str


@dataclass(frozen=True)
class Command:
    """One command or magic: its title, what it does, its usage line and its arguments."""

    key: str
    title: str
    summary: str
    usage: str
    options: tuple[Option, ...]
    description: tuple[str, ...] = ()  # what ``--help`` says above the arguments, paragraph by paragraph


def _usage(parser: argparse.ArgumentParser, prog: str) -> str:
    formatter = argparse.HelpFormatter(prog=prog, width=USAGE_WIDTH)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups, prefix="")
    return formatter.format_help().strip()


def _spelling(action: argparse.Action) -> str:
    if not action.option_strings:
        return str(action.metavar or action.dest)
    if action.nargs == 0:
        return ", ".join(action.option_strings)
    metavar = action.metavar or action.dest.upper()
    if isinstance(metavar, tuple):
        metavar = " ".join(metavar)
    suffix = f" [{metavar}]" if action.nargs == "?" else f" {metavar}"
    return ", ".join(action.option_strings) + suffix


def _details(action: argparse.Action) -> str:
    said = []
    if action.required and action.option_strings:
        said.append("required")
    if isinstance(action, argparse._AppendAction) and "repeatable" not in (action.help or ""):
        said.append("repeatable")
    if action.choices is not None:
        said.append("one of " + ", ".join(str(choice) for choice in action.choices))
    if action.nargs == "?" and action.const is not None and action.option_strings:
        said.append(f"alone: {action.const}")
    if action.default not in (None, False, [], argparse.SUPPRESS) and not isinstance(action.default, bool):
        said.append(f"default {action.default}")
    return "; ".join(said)


def _help(action: argparse.Action, prog: str) -> str:
    """The help text as ``--help`` prints it (argparse expands ``%(default)s`` and ``%%``), on one line."""
    text = action.help or ""
    if "%" in text:
        text = text % {**vars(action), "prog": prog}
    return " ".join(text.split())


def arguments(parser: argparse.ArgumentParser) -> tuple[Option, ...]:
    """Every argument of ``parser`` but ``--help``, as its help would list it."""
    return tuple(
        Option(_spelling(action), _help(action, parser.prog), _details(action))
        for action in parser._actions
        if not isinstance(action, argparse._HelpAction | argparse._SubParsersAction)
    )


def subcommands(parser: argparse.ArgumentParser) -> dict[str, tuple[argparse.ArgumentParser, str]]:
    """Each subcommand of ``parser``: its parser and the help its command list gives it."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            return {name: (sub, helps.get(name, "")) for name, sub in action.choices.items()}
    return {}


def cli_commands() -> list[Command]:
    """``mkl`` itself and every subcommand, read from the parser ``mkl`` runs."""
    from mkl_notebook.cli import build_parser

    parser = build_parser()
    top = Command("mkl", "mkl", parser.description or "", _usage(parser, "mkl"), arguments(parser))
    return [top] + [
        Command(
            name,
            f"mkl {name}",
            " ".join(summary.split()),
            _usage(sub, f"mkl {name}"),
            arguments(sub),
            tuple(" ".join(part.split()) for part in re.split(r"\n\s*\n", sub.description or "") if part.strip()),
        )
        for name, (sub, summary) in subcommands(parser).items()
    ]


def help_entries(text: str) -> dict[str, list[str]]:
    """The ``%mkl help`` text cut into entries (a line starting ``%mkl`` or ``%%mkl`` and the indented lines after
    it), by the subcommand each names (``%%mkl`` alone: the cell magic that defines a machine)."""
    entries: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        head = re.match(r"^(%%?mkl)(?: (\w+))?", line)
        if head:
            current = entries.setdefault(head.group(2) or head.group(1), [])
        if current is not None and line.strip():
            current.append(line)
    return entries


def magic_commands() -> list[Command]:
    """``%%mkl`` and every ``%mkl`` subcommand, read from the magics' parsers and their help text."""
    from mkl_notebook.notebook.magic_args import HELP, SUBCOMMANDS, parsers

    parsed = parsers()
    entries = help_entries(HELP)
    commands = [Command("%%mkl", "%%mkl", "\n".join(entries.get("%%mkl", [])), "%%mkl", ())]
    for name in SUBCOMMANDS:
        parser = parsed.get(name)
        usage = _usage(parser, f"%mkl {name}") if parser is not None else f"%mkl {name}"
        options = arguments(parser) if parser is not None else ()
        commands.append(Command(name, f"%mkl {name}", "\n".join(entries.get(name, [])), usage, options))
    return commands


def _section(command: Command, prefix: str, summary_as_code: bool, document: nodes.document) -> nodes.section:
    section = nodes.section(ids=[f"{prefix}-{nodes.make_id(command.key)}"], names=[f"{prefix}-{command.key}"])
    section += nodes.title("", "", nodes.literal(text=command.title))
    if command.summary:
        if summary_as_code:
            section += nodes.literal_block(text=command.summary, language="text")
        else:
            section += nodes.paragraph(text=command.summary)
    for paragraph in command.description:
        section += nodes.paragraph(text=paragraph)
    section += nodes.literal_block(text=f"usage: {command.usage}", language="text")
    if command.options:
        listing = nodes.definition_list()
        for option in command.options:
            meaning = nodes.definition()
            meaning += nodes.paragraph(text=option.help or "(no help text)")
            if option.details:
                meaning += nodes.paragraph("", "", nodes.emphasis(text=option.details))
            listing += nodes.definition_list_item("", nodes.term("", "", nodes.literal(text=option.spelling)), meaning)
        section += listing
    document.note_explicit_target(section)
    return section


class _Reference(SphinxDirective):
    prefix = ""
    summary_as_code = False

    def commands(self) -> list[Command]:
        raise NotImplementedError

    def run(self) -> list[nodes.Node]:
        import mkl_notebook

        package = Path(mkl_notebook.__file__).parent
        for source in ("app/flags.py", "cli", "notebook/magic_args.py"):  # rebuild the page when a parser changes
            for path in [package / source] if source.endswith(".py") else sorted((package / source).glob("*.py")):
                self.env.note_dependency(str(path))
        return [
            _section(command, self.prefix, self.summary_as_code, self.state.document) for command in self.commands()
        ]


class CommandsDirective(_Reference):
    """Every ``mkl`` command, a section each."""

    prefix = "command"

    def commands(self) -> list[Command]:
        return cli_commands()


class MagicsDirective(_Reference):
    """Every ``%mkl`` magic, a section each."""

    prefix = "magic"
    summary_as_code = True

    def commands(self) -> list[Command]:
        return magic_commands()


def setup(app: Any) -> dict[str, Any]:
    app.add_directive("mkl-commands", CommandsDirective)
    app.add_directive("mkl-magics", MagicsDirective)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
