"""No SQLite store is written on a network filesystem (issue 51, item 3).

A test cannot mount NFS, so the real ``mkl`` reads a mount table written here (``MKL_TEST_MOUNTINFO``, the
tests' stand-in for ``/proc/self/mountinfo``) that says the folder is an NFS home, in the kernel's own format.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from pathlib import Path

import pytest

from mkl_notebook.checkpoints.envelope import checkpoint_of
from mkl_notebook.durable.network_fs import check_store_place, filesystem_type, is_network, mount_table
from mkl_notebook.durable.runs import read_run
from mkl_notebook.durable.stores import SQLiteStore
from mkl_notebook.errors import UserError
from mkl_notebook.notebook import session as session_module

from support import REFUND, REFUND_SCRIPT, RUN_MIME, Cells, mkl_cli, refund_notebook

# Lines as Linux writes them: optional fields before the " - ", a space in a mount point as \040.
ROOT_LINE = "27 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda1 rw,discard"
MOUNTINFO = f"""\
{ROOT_LINE}
22 27 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw
25 27 0:23 / /tmp rw,nosuid,nodev shared:14 - tmpfs tmpfs rw,size=8192k
61 27 0:52 / /home rw,relatime shared:40 - nfs4 filer:/export/home rw,vers=4.2,rsize=1048576,addr=10.0.0.5
70 61 259:3 / /home/alice/scratch rw,relatime shared:45 - ext4 /dev/nvme1n1 rw
72 27 0:60 / /mnt/team\\040share rw,relatime shared:50 - cifs //filer/team rw,vers=3.1.1
73 27 0:61 / /mnt/back\\134slash rw,relatime - fuse.sshfs alice@host:/ rw,user_id=1000
80 27 0:70 / /srv/data rw,relatime - ext4 /dev/sdb1 rw
81 80 0:71 / /srv/data rw,relatime - nfs 10.0.0.7:/data rw,vers=3
"""


def test_the_mount_table_is_read_with_its_escapes_and_optional_fields() -> None:
    mounts = mount_table(MOUNTINFO + "not a mount line\n")
    assert mounts[0] == ("/", "ext4")
    assert ("/home", "nfs4") in mounts
    assert ("/mnt/team share", "cifs") in mounts
    assert ("/mnt/back\\slash", "fuse.sshfs") in mounts
    assert len(mounts) == 9


def _tree(tmp_path: Path) -> tuple[Path, list[tuple[str, str]]]:
    """Folders under ``tmp_path`` mounted as ``MOUNTINFO`` mounts them (its mount points moved under it)."""
    base = Path(os.path.realpath(tmp_path))
    for folder in ("home/alice/scratch", "home2", "mnt/team share", "mnt/back\\slash", "srv/data"):
        (base / folder).mkdir(parents=True)
    moved = "\n".join(
        line.replace(" / /", f" / {base}/", 1) if index else line for index, line in enumerate(MOUNTINFO.splitlines())
    )
    return base, mount_table(moved)


def test_the_longest_mount_point_holding_the_path_gives_its_filesystem(tmp_path: Path) -> None:
    base, mounts = _tree(tmp_path)
    assert filesystem_type(base / "home/alice/notes/.mkl/runs.sqlite", mounts) == "nfs4"  # not there yet
    assert filesystem_type(base / "home/alice/scratch/.mkl/runs.sqlite", mounts) == "ext4"  # a local disk inside
    assert filesystem_type(base / "home2/runs.sqlite", mounts) == "ext4"  # /home2 is not under /home
    assert filesystem_type(base / "mnt/team share/runs.sqlite", mounts) == "cifs"
    assert filesystem_type(base / "mnt/back\\slash/x/runs.sqlite", mounts) == "fuse.sshfs"
    assert filesystem_type(base / "srv/data/runs.sqlite", mounts) == "nfs"  # mounted over the ext4 one
    (base / "link").symlink_to(base / "home/alice")
    assert filesystem_type(base / "link/runs.sqlite", mounts) == "nfs4"  # where the link leads
    assert filesystem_type("/anywhere", [("/other", "nfs")]) is None


def test_network_types_are_told_from_local_ones() -> None:
    for kind in ("nfs", "nfs4", "cifs", "smb3", "9p", "ceph", "lustre", "fuse.sshfs", "fuse.gcsfuse", "fuse.rclone"):
        assert is_network(kind), kind
    for kind in ("ext4", "xfs", "btrfs", "zfs", "overlay", "tmpfs", "fuse.overlayfs", "fuse.lxcfs", None):
        assert not is_network(kind), kind


@pytest.fixture
def nfs_home(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A folder the mount table says is an NFS home (the rest of the machine as it is), with the refund machine
    in it, and the environment that makes ``mkl`` read that table; XDG_DATA_HOME is a local folder."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "refund.mkl").write_text(REFUND, encoding="utf-8")
    table = tmp_path / "mountinfo"
    point = os.path.realpath(home)
    table.write_text(f"{ROOT_LINE}\n61 27 0:52 / {point} rw,relatime - nfs4 filer:/export/home rw,vers=4.2\n")
    env = {"MKL_TEST_MOUNTINFO": str(table), "XDG_DATA_HOME": str(tmp_path / "local" / "share")}
    return home, env


RUN = ("run", "refund.mkl", "--script", str(REFUND_SCRIPT), "--set", "ticket=Broken parcel")


def _everything(folder: Path) -> list[str]:
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*"))


def test_mkl_run_refuses_a_store_on_nfs_in_one_line_and_makes_nothing(nfs_home: tuple[Path, dict[str, str]]) -> None:
    home, env = nfs_home
    before = _everything(home)
    code, status, _, stderr = mkl_cli(home, *RUN, env=env)
    assert code == 2
    assert status["status"] == "error"
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    line = lines[0]
    assert str(Path(os.path.realpath(home)) / ".mkl" / "runs.sqlite") in line or str(home / ".mkl") in line
    assert "network filesystem (nfs4)" in line
    assert "--store postgresql://" in line
    assert "MKL_STORE_ON_NETWORK=allow" in line
    local = Path(env["XDG_DATA_HOME"]) / "mkl" / "home" / "runs.sqlite"
    assert f"--store {local}" in line
    assert _everything(home) == before  # no .mkl folder, no store, no lock file

    # The local path it names works as it is, with the machine still in the NFS folder.
    code, status, _, stderr = mkl_cli(home, *RUN, "--store", str(local), env=env)
    assert (code, status["status"]) == (0, "done"), stderr
    assert local.is_file()
    assert _everything(home) == before


def test_the_override_lets_a_store_be_written_on_nfs(nfs_home: tuple[Path, dict[str, str]]) -> None:
    home, env = nfs_home
    code, status, _, stderr = mkl_cli(home, *RUN, "--id", "r", env={**env, "MKL_STORE_ON_NETWORK": "allow"})
    assert (code, status["status"]) == (0, "done"), stderr
    store = home / ".mkl" / "runs.sqlite"
    assert store.is_file()

    # Reading it needs no override: listing and auditing write nothing there.
    written = {path: path.stat().st_mtime_ns for path in home.rglob("*")}
    code, _, out, stderr = mkl_cli(home, "runs", env=env)
    assert code == 0 and "r  refund  done" in out, stderr
    code, _, out, stderr = mkl_cli(home, "audit", env=env)
    assert code == 0 and "0 answers" in out, stderr
    assert {path: path.stat().st_mtime_ns for path in home.rglob("*")} == written

    # Writing it again without the override is refused.
    code, _, _, stderr = mkl_cli(home, *RUN, "--id", "r", "--fresh", env=env)
    assert code == 2 and "network filesystem (nfs4)" in stderr


def test_an_override_that_is_not_allow_is_refused_naming_it(nfs_home: tuple[Path, dict[str, str]]) -> None:
    home, env = nfs_home
    code, _, _, stderr = mkl_cli(home, *RUN, env={**env, "MKL_STORE_ON_NETWORK": "yes"})
    assert code == 2
    assert stderr.strip() == "mkl: error: $MKL_STORE_ON_NETWORK must be 'allow' or unset, not 'yes'"
    assert not (home / ".mkl").exists()


def test_a_store_named_by_url_is_no_file_to_look_at(
    nfs_home: tuple[Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    home, env = nfs_home
    monkeypatch.chdir(home)
    monkeypatch.setenv("MKL_TEST_MOUNTINFO", env["MKL_TEST_MOUNTINFO"])
    check_store_place("postgresql://alice@db.example/runs")  # the PostgreSQL store: nothing to refuse
    with pytest.raises(UserError, match="nfs4"):
        check_store_place("runs.sqlite")


def test_a_kernel_refuses_a_store_on_nfs_in_one_line(
    ip: Cells, nfs_home: tuple[Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    home, env = nfs_home
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    ip.define(REFUND)
    settings = session_module.current_session().settings
    before = settings.store
    error = ip.fails(f"%mkl config store={home}/runs.sqlite")
    message = str(error)
    assert "\n" not in message.strip()
    assert "network filesystem (nfs4)" in message and "postgresql://" in message and "%mkl config store=" in message
    assert settings.store == before  # the setting did not change
    assert _everything(home) == ["refund.mkl"]

    # The notebook's own folder on NFS: its default store is refused at the first run, and no run is drawn.
    monkeypatch.chdir(home)
    ip.out.clear()
    error = ip.fails(f"%mkl run refund --no-hitl --script {REFUND_SCRIPT}")
    assert "network filesystem (nfs4)" in str(error)
    assert not ip.out.with_mime(RUN_MIME)
    assert _everything(home) == ["refund.mkl"]

    # A local store, named the way the line says, works.
    local = Path(env["XDG_DATA_HOME"]) / "mkl" / "home" / "runs.sqlite"
    assert str(local) in str(error)
    ip.run(f"%mkl config store={local}")
    ip.run(f"%mkl run refund --no-hitl --script {REFUND_SCRIPT}")
    assert local.is_file()


def test_the_documented_network_types_are_those_checked() -> None:
    from mkl_notebook.durable.network_fs import NETWORK_TYPES

    from support import ROOT

    text = (ROOT / "docs" / "language.md").read_text(encoding="utf-8")
    section = text.split("### No store on a network filesystem", 1)[1].split("Every other type is taken as local", 1)[0]
    listed = set(re.findall(r"`([a-z0-9.-]+)`", section.split("refused in one line, with nothing made:", 1)[1]))
    assert listed == NETWORK_TYPES


def _snapshot(folder: Path) -> dict[str, int]:
    """Every file and folder under ``folder``, with when it last changed: what reading must leave as it is."""
    return {str(path.relative_to(folder)): path.stat().st_mtime_ns for path in folder.rglob("*")}


@pytest.fixture
def waiting_on_nfs(nfs_home: tuple[Path, dict[str, str]]) -> tuple[Path, dict[str, str]]:
    """The NFS home's store (written there once, with the override) holding run 'r', waiting for a person."""
    home, env = nfs_home
    code, status, _, stderr = mkl_cli(home, *RUN, "--id", "r", "--hitl", env={**env, "MKL_STORE_ON_NETWORK": "allow"})
    assert (code, status["status"]) == (3, "suspended"), stderr
    return home, env


READING_COMMANDS = {
    "runs": ("runs",),
    "runs FOLDER": ("runs", "."),
    "audit": ("audit",),
    "trace": ("trace", "--id", "r"),
    "plan": ("plan", "refund.mkl", "--id", "r"),
    "plan --over": ("plan", "refund.mkl", "--over", "."),
}


KERNEL_READINGS = (
    *("%mkl pending", "%mkl pending --queue", "%mkl pending --all .", "%mkl runs", "%mkl audit"),
    *("%mkl trace r", "%mkl visits r", "%mkl plan r"),
)


def test_the_documented_reading_commands_are_those_held_by_these_tests() -> None:
    """The docs state one rule for every command on a network filesystem and name the commands that only read:
    each of them is one these tests run there."""
    from support import ROOT

    text = " ".join((ROOT / "docs" / "language.md").read_text(encoding="utf-8").split())
    listed = text.split("The commands that only read", 1)[1].split("So a store made on NFS", 1)[0]
    documented = set(re.findall(r"`(%?mkl [a-z]+)", listed))
    tested = {" ".join(command.split()[:2]) for command in KERNEL_READINGS}
    tested |= {f"mkl {words[0]}" for words in READING_COMMANDS.values()}
    assert documented == tested


@pytest.mark.parametrize("command", list(READING_COMMANDS))
def test_every_reading_command_reads_a_store_on_nfs_and_writes_nothing(
    waiting_on_nfs: tuple[Path, dict[str, str]], command: str
) -> None:
    home, env = waiting_on_nfs
    before = _snapshot(home)
    code, _, out, stderr = mkl_cli(home, *READING_COMMANDS[command], env=env)
    assert code == 0 and "network filesystem" not in stderr, out + stderr
    assert "r" in out and ("refund" in out or "approve" in out.lower() or "answers" in out), out
    assert _snapshot(home) == before  # no store opened to be written: no -wal, -shm or lock file, nothing changed


def test_a_command_that_writes_is_refused_in_the_one_line_on_a_store_on_nfs(
    waiting_on_nfs: tuple[Path, dict[str, str]],
) -> None:
    home, env = waiting_on_nfs
    before = _snapshot(home)
    code, _, _, stderr = mkl_cli(
        home, "resume", "--id", "r", "--reply", "approve", "--script", str(REFUND_SCRIPT), env=env
    )
    assert code == 2 and len(stderr.strip().splitlines()) == 1, stderr
    assert "network filesystem (nfs4)" in stderr and "MKL_STORE_ON_NETWORK=allow" in stderr, stderr
    assert _snapshot(home) == before


def test_a_kernel_reads_a_store_on_nfs_and_writes_nothing_until_it_would_write(
    ip: Cells, waiting_on_nfs: tuple[Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    home, env = waiting_on_nfs
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(home)
    ip.define(REFUND)
    before = _snapshot(home)
    for reading in KERNEL_READINGS:
        ip.run(reading)
    shown = json.dumps([published.data for published in ip.out.published])
    assert "suspended" in shown and "approve" in shown.lower(), shown[:2000]
    assert _snapshot(home) == before

    error = ip.fails(f"%mkl resume r --reply approve --script {REFUND_SCRIPT}")  # answering writes: refused
    assert "network filesystem (nfs4)" in str(error) and "\n" not in str(error).strip()
    assert _snapshot(home) == before


def test_a_kernel_reads_a_run_its_notebook_carries_on_nfs_while_the_store_holds_that_copy(
    nfs_home: tuple[Path, dict[str, str]],
) -> None:
    """A Run All of a notebook that carries a copy of a run the store on NFS holds already: its kernel compares
    the two reading only, lists and traces the run, and writes nothing beside the store; a copy that went further
    would have to be written into the store, and that is refused."""
    import nbformat
    from lab_client import run_all

    from mkl_notebook.checkpoints import notebook_file as nbfile

    home, env = nfs_home
    made = home / "made.ipynb"
    refund_notebook(made, {"r": "Parcel A-1 arrived broken"})
    run_all(made, env={**env, "MKL_STORE_ON_NETWORK": "allow"})  # the store on NFS, as before the check
    with sqlite3.connect(home / ".mkl" / "runs.sqlite") as db:  # its writer gone, everything in the file itself
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    assert not (home / ".mkl" / "runs.sqlite-wal").exists()
    [carried] = nbfile.embedded_runs(made)
    reader = home / "reader.ipynb"
    cells = ["%load_ext mkl_notebook", "%mkl pending", "%mkl trace r"]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in cells])
    notebook.metadata["mkl"] = {"runs": {"r": carried.raw}}
    nbformat.write(notebook, reader)
    before = {name: when for name, when in _snapshot(home).items() if name != reader.name}

    ran = run_all(reader, env=env)
    shown = json.dumps([output for cell in ran.cells for output in cell.get("outputs", [])])
    assert "suspended" in shown and "network filesystem" not in shown, shown[:2000]
    assert {name: when for name, when in _snapshot(home).items() if name != reader.name} == before

    # The notebook's copy goes on past the store's history (answered where the store was then copied back as it
    # was): reading it would take that up into the store first, a write, refused in the one line.
    store = home / ".mkl" / "runs.sqlite"
    kept = store.read_bytes()
    allowed = {**env, "MKL_STORE_ON_NETWORK": "allow"}
    _, listing, _, _ = mkl_cli(home, "runs", made.name, env=env)
    question = listing["runs"][0]["question_id"]
    answer = ("--question", question, "--reply", "approve", "--script", "refund.script.yaml")
    code, _, out, err = mkl_cli(home, "resume", made.name, "--run", "r", *answer, env=allowed)
    assert code in (0, 3), out + err
    store.write_bytes(kept)
    [answered] = nbfile.embedded_runs(made)
    notebook.metadata["mkl"] = {"runs": {"r": answered.raw}}
    nbformat.write(notebook, reader)
    ran = run_all(reader, env=env, allow_errors=True)
    for cell in ran.cells[1:]:  # %mkl pending, %mkl trace r: each refused in the one line (a UsageError)
        said = "".join(output.get("text", "") for output in cell.get("outputs", []))
        assert said.startswith("UsageError: ") and "network filesystem (nfs4)" in said, said
        assert len(said.strip().splitlines()) == 1, said


def test_a_page_saying_hello_to_a_kernel_on_nfs_has_its_runs_read_and_nothing_written(
    waiting_on_nfs: tuple[Path, dict[str, str]],
) -> None:
    """JupyterLab's extension hands the kernel the runs the notebook's metadata holds (its hello); the kernel reads
    the store's history of each, to put an older copy right, writing nothing in the store on NFS."""
    from test_metadata_runs import _Kernel

    home, env = waiting_on_nfs
    store = SQLiteStore(home / ".mkl" / "runs.sqlite", read_only=True)
    held = store.read("r")
    store.close()
    older = {"r": checkpoint_of(read_run("r", held[:-2]))}  # the metadata's copy: before the run last stopped
    before = _snapshot(home)
    kernel = _Kernel(home, "flow.ipynb", env)
    try:
        kernel.say(kernel.load_mkl(), {"op": "hello", "runs": older})
        shown = kernel.execute("%mkl pending", every=True)
    finally:
        kernel.close()
    put = [m["content"]["data"] for m in shown if m["msg_type"] == "comm_msg"]
    assert [(data["op"], data["run"]) for data in put if data.get("op") == "put"] == [("put", "r")], put
    texts = json.dumps([m["content"] for m in shown])
    assert "network filesystem" not in texts and "suspended" in texts, texts[:2000]
    assert _snapshot(home) == before
