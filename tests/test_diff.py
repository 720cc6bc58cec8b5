"""`mkl diff RUN_A RUN_B` and `%mkl diff`: where two runs part, what differs, and what each spent.

Two runs of the README's refund example stop at the same question; one is approved, the other rejected, so the
rejected one goes on to `withhold`. Real components: `mkl` subprocesses, SQLite stores, a notebook file that
carries a run only in its metadata (as one sent for approval does after nbstripout), a real IPython shell.
Reading only: the store and the notebook are byte for byte as they were.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

import nbformat

from mkl_notebook.render.diff_views import diff_html

from support import EXAMPLES, REFUND, REFUND_SCRIPT, RUN_MIME, Cells, mkl_cli

RUN = ["--hitl", "--script", str(REFUND_SCRIPT), "--set", "ticket=Parcel A-1001 arrived broken"]
PARTED = {"step": 2, "state_a": "draft", "state_b": "draft", "what": "reply"}
VERDICT = "The runs part at step 2 (draft): the reply differs."


def _answered(folder: Path, run_id: str, reply: str, *, env: dict[str, str] | None = None, keep: bool = False) -> None:
    """Run the refund example as ``run_id`` in ``folder`` until it asks, then answer ``reply`` (``keep``: its
    finished checkpoint written to ``RUN.json``)."""
    folder.mkdir(parents=True, exist_ok=True)
    code, status, _, err = mkl_cli(folder, "run", str(EXAMPLES / "refund.mkl"), "--id", run_id, *RUN, env=env)
    assert code == 3, err
    kept = ["--checkpoint", f"{run_id}.json"] if keep else []
    code, _, _, err = mkl_cli(folder, "resume", "--id", run_id, "--question", status["question_id"], "--reply", reply,
                              "--script", str(REFUND_SCRIPT), *kept, env=env)  # fmt: skip
    assert code == 0, err


def _files(folder: Path) -> dict[str, str]:
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def _sent_notebook(path: Path, checkpoint: Path) -> None:
    """A notebook that carries a run only in its metadata, its outputs stripped, as one sent for approval."""
    data = json.loads(checkpoint.read_text(encoding="utf-8"))
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(f"%mkl run refund --id {data['run_id']}")])
    notebook.metadata["mkl"] = {"runs": {data["run_id"]: data}}
    nbformat.write(notebook, path)


def test_mkl_diff_names_where_two_refund_runs_part_in_text_and_json_and_writes_nothing(tmp_path: Path) -> None:
    _answered(tmp_path, "ra", "approve")
    _answered(tmp_path, "rb", "reject")
    before = _files(tmp_path)
    code, _, out, err = mkl_cli(tmp_path, "diff", "ra", "rb")
    assert code == 1, err
    assert VERDICT in out
    reply_row = next(line for line in out.splitlines() if line.split()[:3] == ["2", "draft", "reply"])
    assert reply_row.split() == ["2", "draft", "reply", "approve", "reject"]
    assert "otherwise → END" in out and "the refund was not approved → withhold" in out
    assert "-Hello! Your order A-1001 qualifies: we will refund it today. (approved)" in out
    assert "+Hello! A colleague will look at order A-1001 and write to you again shortly." in out
    assert "240 / 80" in out and "360 / 120" in out  # each run's tokens, in and out

    code, _, out, err = mkl_cli(tmp_path, "diff", "ra", "rb", "--json")
    assert code == 1, err
    found = json.loads(out)
    assert found["identical"] is False and found["parted"] == PARTED
    decisions = {d["what"]: d for d in found["decisions"]}
    reply = decisions["reply"]
    assert (reply["a"], reply["b"], reply["state"]) == ("approve", "reject", "draft")
    assert decisions["gate"]["state"] == "send" and decisions["path"]["b"] == "withhold"
    assert (found["a"]["output_tokens"], found["b"]["output_tokens"], found["b"]["steps"]) == (80, 120, 4)
    assert _files(tmp_path) == before

    code, _, out, err = mkl_cli(tmp_path, "diff", "ra", "ra")
    assert code == 0, err
    assert "The runs are identical" in out and "Decisions that differ" not in out

    code, _, _, err = mkl_cli(tmp_path, "run", str(EXAMPLES / "refund.mkl"), "--id", "waits", *RUN)
    assert code == 3, err
    code, _, out, err = mkl_cli(tmp_path, "diff", "waits", "ra", "--json")  # one still asks, one was answered
    assert code == 1, err
    found = json.loads(out)
    assert found["parted"] == PARTED and found["a"]["status"] == "suspended"
    first = found["decisions"][0]
    assert (first["what"], first["a"], first["b"]) == ("reply", "(no answer)", "approve")


def test_a_run_only_a_notebooks_metadata_holds_is_diffed_against_the_stores(tmp_path: Path) -> None:
    """Bob's rejected run reaches Alice in a notebook (its outputs stripped); her approved one is in her store.
    Signed by her own key it is made by her; by Bob's, which she does not trust, it is marked so."""
    alice = tmp_path / "alice"
    _answered(alice, "ra", "approve")
    _answered(alice / "own", "rb", "reject", keep=True)
    _sent_notebook(alice / "mine.ipynb", alice / "own" / "rb.json")
    bob_keys = {"JUPYTER_DATA_DIR": tempfile.mkdtemp(prefix="bob-keys-", dir=tmp_path)}
    _answered(tmp_path / "bob", "rb", "reject", env=bob_keys, keep=True)
    _sent_notebook(alice / "sent.ipynb", tmp_path / "bob" / "rb.json")
    before = _files(alice)

    code, _, out, err = mkl_cli(alice, "diff", "ra", "sent.ipynb:rb", "--json")
    assert code == 1, err
    found = json.loads(out)
    assert found["parted"] == PARTED
    assert found["b"]["where"] == "sent.ipynb (metadata)" and found["b"]["trusted"] is False
    assert "trusted" not in found["a"]  # (a store's run is this person's own)
    code, _, out, err = mkl_cli(alice, "diff", "ra", "sent.ipynb:rb")
    assert code == 1, err
    assert VERDICT in out and "NOT TRUSTED" in out

    code, _, out, err = mkl_cli(alice, "diff", "mine.ipynb:rb", "ra", "--json")
    assert code == 1, err
    found = json.loads(out)
    assert found["a"]["trusted"] is True and found["a"]["made_by"].startswith("made by you")
    assert {d["what"]: (d["a"], d["b"]) for d in found["decisions"]}["reply"] == ("reject", "approve")

    code, _, out, err = mkl_cli(alice / "own", "diff", "rb", "ra", "--store-b", str(alice / ".mkl" / "runs.sqlite"))
    assert code == 1 and VERDICT in out, err
    assert _files(alice) == before


def test_an_unknown_run_or_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    _answered(tmp_path, "ra", "approve")
    before = _files(tmp_path)
    for args in (["ra", "nope"], ["ra", "missing.ipynb:ra"], ["ra", ".ipynb:"], ["ra", "ra", "--store", "none.sqlite"]):
        code, _, _, err = mkl_cli(tmp_path, "diff", *args)
        assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, (args, err)
    code, _, _, err = mkl_cli(tmp_path, "diff", "ra", "nope")
    assert err.strip() == "mkl: error: no run 'nope' in .mkl/runs.sqlite"
    assert _files(tmp_path) == before and not os.path.exists(tmp_path / "none.sqlite")


def test_mkl_diff_in_a_shell_shows_the_table_side_by_side(ip: Cells) -> None:
    ip.define(REFUND)
    script = f"--script {REFUND_SCRIPT} --set ticket=broken --hitl"
    for run_id, value in (("k1", "approve"), ("k2", "reject")):
        ip.run(f"{run_id} = %mkl run refund --id {run_id} {script}")
        ip.run(f"{run_id}.submit({value!r})")
    ip.out.clear()
    ip.run("%mkl diff k1 k2")
    shown = ip.out.last("text/html")
    html = shown["text/html"]
    assert "<table>" in html and f"<p>{VERDICT}</p>" in html
    assert "<td" in html and ">approve</td>" in html and ">reject</td>" in html
    assert VERDICT in shown["text/plain"]
    ip.out.clear()
    ip.run("%mkl diff k1 k1")
    assert "The runs are identical" in ip.out.last("text/html")["text/html"]
    assert "no run 'nope'" in str(ip.fails("%mkl diff k1 nope"))

    checkpoint = ip.tmp / "k2.json"  # k2 as a notebook sent back carries it, only in its metadata
    checkpoint.write_text(json.dumps(ip.shell.user_ns["k2"]._repr_mimebundle_()[RUN_MIME]), encoding="utf-8")
    _sent_notebook(ip.tmp / "sent.ipynb", checkpoint)
    ip.out.clear()
    ip.run("%mkl diff k1 sent.ipynb:k2")
    html = ip.out.last("text/html")["text/html"]
    assert f"<p>{VERDICT}</p>" in html and "sent.ipynb (metadata)" in html and "made by you" in html


def test_an_output_that_differs_is_diffed_and_text_from_the_files_is_shown_escaped(tmp_path: Path) -> None:
    """Two runs whose order lookups answered differently part at step 1; the hostile text one of them holds (a
    tag, a terminal escape that would clear the screen) is escaped in the HTML and shown inert on the terminal."""
    plain = """'{"order": "A-1001", "refundable": true}'"""
    hostile = r'"<b>A-1001</b>\x1b[2J"'  # (YAML's double quotes: a real ESC character)
    script = REFUND_SCRIPT.read_text(encoding="utf-8")
    assert plain in script
    (tmp_path / "hostile.yaml").write_text(script.replace(plain, hostile), encoding="utf-8")
    for run_id, used in (("plain", str(REFUND_SCRIPT)), ("odd", "hostile.yaml")):
        code, _, _, err = mkl_cli(tmp_path, "run", str(EXAMPLES / "refund.mkl"), "--id", run_id, "--script", used)
        assert code == 0, err
    code, _, out, err = mkl_cli(tmp_path, "diff", "plain", "odd")
    assert code == 1, err
    assert "The runs part at step 1 (lookup): the output differs." in out
    assert "The output of step 1 (lookup) differs:" in out
    assert "+<b>A-1001</b>" in out and "\x1b" not in out
    code, _, out, err = mkl_cli(tmp_path, "diff", "plain", "odd", "--json")
    assert code == 1, err
    found = json.loads(out)
    assert found["parted"]["what"] == "output" and found["outputs"][0]["b"] == "<b>A-1001</b>\x1b[2J"
    html = diff_html(found)
    assert "&lt;b&gt;A-1001&lt;/b&gt;" in html and "<b>A-1001" not in html


def test_two_runs_given_different_tickets_are_not_identical_though_the_script_answered_alike(tmp_path: Path) -> None:
    """A scripted model answers both runs alike: the path, decisions and outputs match, but the runs were given
    different tickets, and the diff says so rather than calling them identical."""
    for run_id, ticket in (("t1", "Parcel A-1001 arrived broken"), ("t2", "Parcel B-2 never came")):
        given = ["--id", run_id, "--script", str(REFUND_SCRIPT), "--set", f"ticket={ticket}"]
        code, _, _, err = mkl_cli(tmp_path, "run", str(EXAMPLES / "refund.mkl"), *given)
        assert code == 0, err
    code, _, out, err = mkl_cli(tmp_path, "diff", "t1", "t2")
    assert code == 1, err
    assert "identical" not in out
    assert "The runs were given different input ticket, and took the same path" in out
    row = next(line for line in out.splitlines() if line.strip().startswith("input ticket"))
    assert "Parcel A-1001 arrived broken" in row and "Parcel B-2 never came" in row
    code, _, out, err = mkl_cli(tmp_path, "diff", "t1", "t2", "--json")
    assert code == 1, err
    found = json.loads(out)
    assert found["identical"] is False and found["parted"] is None
    assert found["given"] == [
        {"what": "input ticket", "a": "Parcel A-1001 arrived broken", "b": "Parcel B-2 never came"}
    ]
