"""``mkl trust``: show your signing key, and trust the keys of the people whose notebooks you take up.

A name in a signature is only what its signer claims, so trusting the keys a file holds is a choice made
per key, after seeing its fingerprint: nothing is trusted under a name the file gave it without a yes.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from ..app.errors import UsageProblem
from ..render.commands import trust_command
from ..render.common import answer_time, printable

if TYPE_CHECKING:  # (signatures are loaded when the command runs, not to build `mkl --help`)
    from ..app.checkpoints import FileKey
    from ..app.trust import Keyring


def trust_main(args: argparse.Namespace) -> int:
    from ..app.checkpoints import keys_in
    from ..app.trust import KEY_PREFIX, Keyring

    keyring = Keyring()
    if args.what is None:
        _show(keyring)
        return 0
    if args.what.startswith(KEY_PREFIX):
        if args.key:
            raise UsageProblem("--key picks one of a file's keys; give the file, or the key alone")
        _trust_or_remove(keyring, args.what, args.name or "", args.remove)
        return 0
    found = keys_in(Path(args.what))
    for entry in found:
        _list_key(keyring, entry)
    if args.key:
        found = [_picked(found, args.key, args.what)]
    if args.remove:
        for entry in found:
            _trust_or_remove(keyring, entry.key, "", remove=True)
        return 0
    unknown = [entry for entry in found if _known_as(keyring, entry.key) is None]
    if args.key or args.name:
        if not args.key and len(unknown) > 1:
            raise UsageProblem(
                f"{args.what} holds {len(unknown)} keys you do not trust; say which with --key FINGERPRINT"
            )
        for entry in found if args.key else unknown:
            _trust_or_remove(keyring, entry.key, args.name or "", remove=False)
    elif unknown and sys.stdin.isatty() and sys.stdout.isatty():
        for entry in unknown:
            _ask(keyring, entry)
    elif unknown:
        raise UsageProblem(
            f"nothing trusted: {args.what} holds {len(unknown)} key(s) you do not trust; once you know whose one "
            f"is, trust it with `{trust_command(args.what)} --key FINGERPRINT --name NAME`"
        )
    if not unknown:
        print(f"every key in {printable(args.what)} is yours or one you trust")
    return 0


def _known_as(keyring: Keyring, key: str) -> str | None:
    """Whose key this person knows ``key`` to be: "yours", "trusted as 'NAME'", or None (not trusted)."""
    if key == keyring.own_key():
        return "yours"
    entry = keyring.trusted().get(key)
    return None if entry is None else f"trusted as '{printable(entry.get('name'))}'"


def _list_key(keyring: Keyring, entry: FileKey) -> None:
    """A key of the file: its fingerprint, the names it signs as, whether it is trusted, and what it signed."""
    names = ", ".join(f"'{printable(name)}'" for name in entry.names)
    known = _known_as(keyring, entry.key)
    print(f"key {entry.fingerprint}  {known or 'NOT TRUSTED'}  signs as {names}  {entry.key}")
    if known is None:
        for name in entry.names:
            taken = keyring.name_taken(name)
            if taken is not None:
                print(f"    beware: {printable(taken)}")
    for stretch in entry.stretches:
        when = f", {answer_time(stretch.time)}" if stretch.time is not None else ""
        print(f"    signed run '{printable(stretch.run_id)}' records {stretch.start + 1}–{stretch.end}{when}")


def _picked(found: list[FileKey], wanted: str, source: str) -> FileKey:
    """The key of the file that ``wanted`` names: its fingerprint (spaces optional) or the whole key."""
    digits = "".join(wanted.split()).lower()
    for entry in found:
        if wanted == entry.key or digits == entry.fingerprint.replace(" ", ""):
            return entry
    raise UsageProblem(f"no key in {source} has the fingerprint {printable(wanted)!r} (see the keys listed above)")


def _ask(keyring: Keyring, entry: FileKey) -> None:
    """Ask whether to trust one key of the file, as the one name it signs as (y/N); no answer is a no."""
    if len(entry.names) != 1:
        print(f"    signs as several names: trust it with --key '{entry.fingerprint}' --name NAME if you know whose")
        return
    name = entry.names[0]
    taken = keyring.name_taken(name)
    if taken is not None:
        print(f"    not asked: {printable(taken)}")
        return
    try:
        answer = input(f"Trust key {entry.fingerprint} as '{printable(name)}'s? [y/N] ")
    except EOFError:
        answer = ""
    if answer.strip().lower() in ("y", "yes"):
        _trust_or_remove(keyring, entry.key, name, remove=False)
    else:
        print(f"not trusted: {entry.fingerprint}")


def _trust_or_remove(keyring: Keyring, key: str, name: str, remove: bool) -> None:
    from ..app.trust import key_fingerprint

    if remove:
        done = keyring.remove(key)
        print(f"{'no longer trusted' if done else 'was not trusted'}: {key_fingerprint(key)}  {printable(key)}")
        return
    if not name:
        raise UsageProblem("say whose key it is with --name NAME")
    at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    added = keyring.add(key, name, at)
    print(f"{'trusted' if added else 'already trusted'}: {key_fingerprint(key)}  {printable(name)}  {key}")


def _show(keyring: Keyring) -> None:
    from ..app.trust import key_fingerprint

    own = keyring.own_key()
    print(f"your key: {key_fingerprint(own)}  {own}")
    print(f"    (kept in {printable(keyring.folder)}; give the line above to the people who take up your notebooks)")
    trusted = keyring.trusted()
    if not trusted:
        print("you trust no other key yet")
    for key, entry in sorted(trusted.items(), key=lambda item: str(item[1].get("name"))):
        name, added = printable(entry.get("name")), printable(entry.get("added"))
        print(f"trusted: {key_fingerprint(key)}  {name}  {printable(key)}  (added {added})")
