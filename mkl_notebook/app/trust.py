"""Whose records to take up: this person's signing key and the keys they trust.

Every record this person's runs append is signed with their own key (a ``sign`` record ends each
advance), kept in their Jupyter data folder (``mkl/signing-key.pem``, readable by them only; made on
first use). What a copy of a run from a file adds to the history held here is *trusted* when every
stretch of it is signed by their own key or one they added (``mkl trust KEY``, kept in
``mkl/trusted-keys.json``) and each signature holds. Anything else (unsigned, signed by an unknown key,
or changed after it was signed) carries a mark saying so wherever it is shown, and is taken up only by an
explicit choice.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, load_pem_private_key

from ..checkpoints import seals
from ..checkpoints.seals import KEY_PREFIX, Seal, Signer, key_fingerprint
from ..durable.disk import sync_folder
from ..durable.reading import RunState, approvers_in
from ..durable.records import is_ending, kind_of
from ..lang import files
from ..render.commands import trust_key_command
from .errors import UsageProblem
from .replies import not_approved_reply, who

__all__ = ["KEY_PREFIX", "Keyring", "Provenance", "Signer", "Untrusted", "key_fingerprint", "keyring_folder"]

KEY_FILE = "signing-key.pem"
TRUSTED_FILE = "trusted-keys.json"
MAX_KEYRING_FILE = 1024 * 1024


@dataclass(frozen=True)
class Provenance:
    """Who made a checkpoint, as far as this person can tell: ``trusted`` or not, and what to say about it."""

    trusted: bool
    mark: str  # "made by you", "made by Alice (trusted key 1a2b …)", "made by an unknown key …", …
    key: str | None = None
    by: str | None = None  # the name the key's signatures claim
    name: str | None = None  # of a key not trusted: a name to trust it under that no one here has yet
    refused: str | None = None  # an answer in it from someone the run does not let answer: never taken up


def keyring_folder() -> Path:
    """Where this person's keys live: ``mkl`` in their Jupyter data folder (``$JUPYTER_DATA_DIR`` moves it)."""
    from jupyter_core.paths import jupyter_data_dir

    return Path(jupyter_data_dir()) / "mkl"


class Keyring:
    """This person's signing key and the keys they trust, in one folder."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder if folder is not None else keyring_folder()
        self._signer: Signer | None = None

    # -- this person's own key --------------------------------------------------------------

    def signer(self, by: str | None = None) -> Signer:
        """The signer of this person's checkpoints; the key is made the first time one is needed."""
        name = who(by)
        if self._signer is None:
            self._signer = Signer(self._private_key(), name)
        elif self._signer.by != name[: seals.MAX_NAME]:  # the same key, signing as the name given now
            self._signer = Signer(self._signer.private, name)
        return self._signer

    def own_key(self) -> str:
        return self.signer().key

    def _own_key_if_made(self) -> str | None:
        """This person's key when they have one; judging a file's runs never makes one (a listing writes nothing,
        and with no key of their own, nothing was made by them)."""
        if self._signer is None and not (self.folder / KEY_FILE).exists():
            return None
        return self.own_key()

    def _private_key(self) -> Ed25519PrivateKey:
        path = self.folder / KEY_FILE
        if not path.exists():
            self._make_key(path)
        try:
            data = files.read_bytes(path, MAX_KEYRING_FILE)
            key = load_pem_private_key(data, password=None)
        except (OSError, ValueError, TypeError) as exc:
            problem = f"{path}: your signing key cannot be read ({exc}); move it away to make a new one"
            raise UsageProblem(problem) from None
        if not isinstance(key, Ed25519PrivateKey):
            raise UsageProblem(f"{path}: is not an Ed25519 signing key; move it away to make a new one")
        return key

    def _make_key(self, path: Path) -> None:
        """A new key, written so that no one else can read it and two processes never make two."""
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        pem = Ed25519PrivateKey.generate().private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
        fd, temp = tempfile.mkstemp(prefix=".signing-key.", dir=self.folder)  # made owner-only (0600)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(pem)
                handle.flush()
                os.fsync(handle.fileno())
            with contextlib.suppress(FileExistsError):  # another process made one first: use theirs
                os.link(temp, path)
            sync_folder(self.folder)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(temp)

    # -- the keys this person trusts --------------------------------------------------------

    def trusted(self) -> dict[str, dict[str, Any]]:
        """The keys this person added, each with the name they gave it and when."""
        path = self.folder / TRUSTED_FILE
        if not path.exists():
            return {}
        try:
            data = files.parse_json(files.read_text(path, MAX_KEYRING_FILE))
        except (OSError, ValueError) as exc:
            raise UsageProblem(f"{path}: your trusted keys cannot be read ({exc})") from None
        keys = data.get("keys") if isinstance(data, dict) else None
        if not isinstance(keys, dict) or not all(isinstance(entry, dict) for entry in keys.values()):
            raise UsageProblem(f"{path}: is not a list of trusted keys")
        return keys

    def add(self, key: str, name: str, at: str) -> bool:
        """Trust ``key`` under ``name``; False when it was trusted already. A name says whose key it is in
        every mark, so it is refused (:class:`UsageProblem`, saying whose it is) when it is already another
        trusted key's, or this person's own: a second key cannot pass for someone already known."""
        seals.public_key(key)  # a malformed key is refused before anything is written
        keys = self.trusted()
        if key in keys or key == self.own_key():
            return False
        name = name[: seals.MAX_NAME]
        taken = self.name_taken(name, keys)
        if taken is not None:
            raise UsageProblem(f"{taken}; trust key {key_fingerprint(key)} under another name")
        keys[key] = {"name": name, "added": at}
        self._write_trusted(keys)
        return True

    def name_taken(self, name: str, keys: dict[str, dict[str, Any]] | None = None) -> str | None:
        """Whose ``name`` already is, if anyone's (this person's, or a key they trust; case and spacing do not
        tell names apart), as a phrase; None when no one has it."""
        wanted = _name_key(name)
        if not wanted:
            return "a key needs a name that says whose it is"
        own = self._signer.by if self._signer is not None else who()[: seals.MAX_NAME]  # (no key made to say it)
        if wanted == _name_key(own):
            return f"'{name}' is your own name (your runs are signed as '{own}')"
        for other, entry in (self.trusted() if keys is None else keys).items():
            if _name_key(str(entry.get("name", ""))) == wanted:
                return (
                    f"'{name}' is already the name of key {key_fingerprint(other)} that you trust "
                    f"(as '{entry.get('name')}', added {entry.get('added')})"
                )
        return None

    def known_as(self) -> dict[str, str]:
        """The fingerprint of each key this person knows, with the name they trust it under (``you`` for their
        own): how a listing names whose key signed each answer. Reading only: their own key is not made for it."""
        known = {key_fingerprint(key): str(entry.get("name")) for key, entry in self.trusted().items()}
        if (self.folder / KEY_FILE).exists():
            known[key_fingerprint(self.own_key())] = "you"
        return known

    def remove(self, key: str) -> bool:
        keys = self.trusted()
        if keys.pop(key, None) is None:
            return False
        self._write_trusted(keys)
        return True

    def _write_trusted(self, keys: dict[str, dict[str, Any]]) -> None:
        from ..checkpoints.envelope import write_private

        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_private(self.folder / TRUSTED_FILE, json.dumps({"keys": keys}, indent=1, sort_keys=True) + "\n")

    # -- judging a checkpoint ---------------------------------------------------------------

    def judge(self, seal: Seal | None) -> Provenance:
        """Whether a checkpoint with ``seal`` is one this person trusts, and the mark to show with it."""
        if seal is None:
            return Provenance(False, "unsigned: nothing says who made it")
        if not seal.holds:
            return Provenance(
                False, f"changed after it was signed (the signature by key {seal.fingerprint} does not match)", seal.key
            )
        if seal.key == self._own_key_if_made():
            return Provenance(True, "made by you", seal.key)
        known = self.trusted().get(seal.key)
        if known is not None:
            return Provenance(True, f"made by {known.get('name')} (trusted key {seal.fingerprint})", seal.key)
        mark = f"made by an unknown key {seal.fingerprint} (signed as {seal.by!r})"
        return Provenance(False, mark, seal.key, seal.by, self.free_name(seal.by, seal.key))

    def free_name(self, claimed: str, key: str) -> str:
        """A name to trust ``key`` under that no one here has: the name its signatures claim when it is free,
        else that name and the start of the key's fingerprint (people who share an OS account, all ``jovyan``,
        sign as one name): "jovyan-1c3e". A person may give any other free name instead."""
        base = "-".join("".join(char for char in claimed if char.isprintable()).split())[:40] or "someone"
        tail = key_fingerprint(key).replace(" ", "")
        for name in (base, *(f"{base}-{tail[:size]}" for size in (4, 8, len(tail)))):
            if self.name_taken(name) is None:
                return name
        return f"{base}-{tail}"

    def judge_history(self, records: list[dict[str, Any]], seal: Seal | None = None, since: int = 0) -> Provenance:
        """Whether the records of a history from ``since`` on are all signed by this person or keys they trust
        (each stretch by its ``sign`` record; those after the last one by the checkpoint's whole ``seal``), and
        the mark to show: who signed them, or the first stretch that is not trusted and why."""
        judged = [
            self.judge(stretch.seal)
            for stretch in seals.signatures(records, seal)
            if stretch.end > since or (stretch.end == since and stretch.time is not None)
        ]
        refused = next((why for _, why in self.refused_replies(records, seal, since)), None)
        for provenance in judged:
            if not provenance.trusted:
                return replace(provenance, refused=refused)
        marks = list(dict.fromkeys(provenance.mark.removeprefix("made by ") for provenance in judged))
        if refused is not None:
            return Provenance(False, f"refused: {refused}", judged[-1].key if judged else None, refused=refused)
        if not marks:
            return Provenance(True, "nothing new")
        return Provenance(True, "made by " + ", ".join(marks), judged[-1].key)

    def refused_replies(
        self, records: list[dict[str, Any]], seal: Seal | None = None, since: int = 0
    ) -> list[tuple[int, str]]:
        """The answers of a history from ``since`` on that its run does not let stand (each record's index, and
        why: :func:`~.replies.not_approved_reply`), judged by the approvers in force where each was given and,
        for a copy going on past a history held (``since``), those in force at its end too: a copy cannot
        loosen the rule it came under. A key counts by the name this person trusts it under, never by the
        name its signatures claim; their own key by the name their records establish."""
        stretches = seals.signatures(records, seal)
        trusted = {key: str(entry.get("name")) for key, entry in self.trusted().items()}
        held: tuple[str, ...] = ()
        rule: tuple[str, ...] = ()
        refused: list[tuple[int, str]] = []
        for index, record in enumerate(records):
            if index == since:
                held = rule
            kind = kind_of(record)
            options = record.get("options")
            if kind in ("start", "rerun") and isinstance(options, dict):
                rule = approvers_in(options)
            if kind != "reply" or index < since:
                continue
            stretch = seals.covering(stretches, index)
            signer = stretch.seal if stretch is not None else None
            name = trusted.get(signer.key) if signer is not None and signer.holds else None
            why = not_approved_reply(record, held, name) or not_approved_reply(record, rule, name)
            if why is not None:
                refused.append((index, why))
        return refused

    def started_here(self, records: list[dict[str, Any]]) -> bool:
        """Whether this person started the run ``records`` hold: its first advance (the start record up to the
        first ending) is signed, right there, by their own key and the signature holds. Only then are paths
        its start record names (the machine file it was started from) theirs to follow."""
        first_end = next((at for at, record in enumerate(records) if is_ending(record)), None)
        if first_end is None:
            return False
        stretches = seals.signatures(records[: first_end + 2])
        first = stretches[0] if stretches else None
        return (
            first is not None
            and first.end == first_end + 1
            and first.seal is not None
            and first.seal.holds
            and first.seal.key == self.own_key()
        )


def _name_key(name: str) -> str:
    """A name as names are told apart: "Alice", "alice" and " alice " are one person's."""
    return " ".join(name.split()).casefold()


class Untrusted(UsageProblem):
    """A copy of a run from a file that this person has not chosen to trust; the message says whose it is, and
    (``added``) what it holds past the copy they have."""

    def __init__(
        self,
        run_id: str,
        source: str,
        provenance: Provenance,
        found: RunState | None = None,
        added: str | None = None,
    ) -> None:
        hint = ""
        self.trust: str | None = None  # the command that trusts the key that signed it, under a name free here
        if provenance.trusted is False and provenance.key and provenance.name is not None:
            if source.endswith(".ipynb"):  # the key by its fingerprint among those that signed the notebook
                self.trust = trust_key_command(key_fingerprint(provenance.key), provenance.name, source)
            else:
                self.trust = trust_key_command(provenance.key, provenance.name)
            hint = f"if {key_fingerprint(provenance.key)} is the key of someone you trust, `{self.trust}`; or "
        what = f"run '{run_id}' is {provenance.mark}"
        if added is not None:
            what = f"run '{run_id}' goes on past the copy you hold ({added}), and that is {provenance.mark}"
        if provenance.refused is not None:
            super().__init__(_refusal(run_id, source, provenance, added, self.trust))
        else:
            super().__init__(
                f"{source}: {what}, so it is not taken up; {hint}pass --trust-file to take up this file's run anyway"
            )
        self.run_id = run_id
        self.source = source
        self.provenance = provenance
        self.found = found  # the run as the file shows it
        self.added = added
        self.checkpoint: dict[str, Any] | None = None  # the copy as the file holds it, to carry on unchanged


def _refusal(run_id: str, source: str, provenance: Provenance, added: str | None, trust: str | None) -> str:
    """Why a copy holding an answer from someone its run does not let answer is not taken up, in one line: who
    answered, who may, and that nothing (not --trust-file) takes it up; trusting the key that signed it, under
    the name of an approver, is the one way when it is an approver's."""
    assert provenance.refused is not None
    goes_on = f" goes on past the copy you hold ({added}) and" if added is not None else ""
    besides = "" if provenance.mark.startswith("refused") else f" (and it is {provenance.mark})"
    hint = f"; if that key is an approver's, trust it under their name: `{trust}`" if trust else ""
    return (
        f"{source}: run '{run_id}'{goes_on} is not taken up: {provenance.refused}{besides}{hint}; the file keeps "
        "it as it came, and --trust-file does not take it up"
    )
