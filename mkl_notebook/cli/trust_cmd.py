"""``mkl trust``: show your signing key, and trust the keys of the people whose notebooks you take up."""

from __future__ import annotations

import argparse
from datetime import datetime, timezone
from pathlib import Path

from ..app.checkpoints import seals_in
from ..app.errors import UsageProblem
from ..app.trust import KEY_PREFIX, Keyring, key_fingerprint
from .common import Commands


def add_trust_parser(commands: Commands) -> None:
    trust = commands.add_parser(
        "trust",
        help="show your key, or trust someone's key (ed25519:…) or the keys that sealed a notebook's runs",
        description="With no argument, print your own key (give it to the people who take up your notebooks) "
        "and the keys you trust. A key or a file trusts that key, or every key that sealed a run in the file.",
    )
    trust.add_argument("what", nargs="?", metavar="KEY|NOTEBOOK|CHECKPOINT", help="a key (ed25519:…) or a file")
    trust.add_argument("--name", help="whose key it is, as you will see it in marks (default: the name it signs as)")
    trust.add_argument("--remove", action="store_true", help="stop trusting the key")
    trust.set_defaults(handler=trust_main)


def trust_main(args: argparse.Namespace) -> int:
    keyring = Keyring()
    if args.what is None:
        _show(keyring)
        return 0
    if args.what.startswith(KEY_PREFIX):
        seals = [(args.what, args.name or "")]
    else:
        seals = [(seal.key, args.name or seal.by) for seal in seals_in(Path(args.what))]
    at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    for key, name in seals:
        if args.remove:
            done = keyring.remove(key)
            print(f"{'no longer trusted' if done else 'was not trusted'}: {key_fingerprint(key)}  {key}")
            continue
        if not name:
            raise UsageProblem("say whose key it is with --name NAME")
        added = keyring.add(key, name, at)
        print(f"{'trusted' if added else 'already trusted'}: {key_fingerprint(key)}  {name}  {key}")
    return 0


def _show(keyring: Keyring) -> None:
    own = keyring.own_key()
    print(f"your key: {key_fingerprint(own)}  {own}")
    print(f"    (kept in {keyring.folder}; give the line above to the people who take up your notebooks)")
    trusted = keyring.trusted()
    if not trusted:
        print("you trust no other key yet")
    for key, entry in sorted(trusted.items(), key=lambda item: str(item[1].get("name"))):
        print(f"trusted: {key_fingerprint(key)}  {entry.get('name')}  {key}  (added {entry.get('added')})")
