"""``--output-file PATH`` (and ``$MKL_OUTPUT_FILE``): a program driving ``mkl`` headless polls a file for the
JSON status line instead of parsing stdout; the file is replaced whole, never seen half written."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

from support import EXAMPLES, REFUND_SCRIPT, env_without_models, mkl_cli

ECHO = """\
mklang: "0.4"
machine: echo
entry: say
budget: 3
result: said
states:
  say: {structure: s, prompt: "Say it.", output: said, gates: [{when: otherwise, then: ok, to: END}]}
"""


def _last_line(stdout: str) -> str:
    return stdout.strip().splitlines()[-1]


def test_the_file_holds_exactly_the_status_line_printed(tmp_path: Path) -> None:
    out = tmp_path / "status.json"
    refund = str(EXAMPLES / "refund.mkl")
    given = ("--script", str(REFUND_SCRIPT), "--hitl", "--set", "amount=40")
    code, status, stdout, err = mkl_cli(tmp_path, "run", refund, *given, "--id", "r1", "--output-file", str(out))
    assert code == 3 and status["status"] == "suspended", err
    assert out.read_text(encoding="utf-8") == _last_line(stdout) + "\n"
    answer = ("--reply", "approve", "--question", status["question_id"], "--script", str(REFUND_SCRIPT))
    code, status, stdout, err = mkl_cli(tmp_path, "resume", "--id", "r1", *answer, "--output-file", str(out))
    assert code == 0 and status["status"] == "done", err
    assert out.read_text(encoding="utf-8") == _last_line(stdout) + "\n"

    # The environment variable, for every command that ends with the line; the flag wins over it.
    polled = tmp_path / "polled.json"
    for args in (("runs",), ("check", refund), ("trace", "--id", "r1"), ("plan", refund, "--id", "r1")):
        code, _status, stdout, err = mkl_cli(tmp_path, *args, env={"MKL_OUTPUT_FILE": str(polled)})
        assert code == 0, err
        assert polled.read_text(encoding="utf-8") == _last_line(stdout) + "\n", args
    mkl_cli(tmp_path, "runs", "--output-file", str(out), env={"MKL_OUTPUT_FILE": str(polled)})
    assert json.loads(out.read_text(encoding="utf-8"))["runs"][0]["run"] == "r1"
    assert "runs" not in json.loads(polled.read_text(encoding="utf-8"))  # still plan's line

    # A usage error ends with a status line too, and that is what the file holds.
    code, status, stdout, _err = mkl_cli(tmp_path, "trace", "--id", "nothing-here", "--output-file", str(out))
    assert status["status"] == "error"
    assert out.read_text(encoding="utf-8") == _last_line(stdout) + "\n"


WRITER = """
import sys
from mkl_notebook.cli import main
machine, out, scripts = sys.argv[1], sys.argv[2], sys.argv[3:]
for round in range(40):
    for number, script in enumerate(scripts):
        main(["run", machine, "--script", script, "--id", f"r{round}-{number}", "--quiet", "--output-file", out])
"""


def test_a_reader_polling_the_file_never_sees_part_of_a_line(tmp_path: Path) -> None:
    """Another process writes the file 80 times (two large lines, alternately) while this one reads it as fast
    as it can: every read that finds the file is one whole status line."""
    (tmp_path / "echo.mkl").write_text(ECHO, encoding="utf-8")
    results = {"a": "a" * 400_000, "b": "b" * 400_000}
    scripts = []
    for name, said in results.items():
        script = tmp_path / f"{name}.yaml"
        script.write_text(json.dumps({"llm": {"produce": [said]}}), encoding="utf-8")
        scripts.append(str(script))
    out = tmp_path / "status.json"
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, "echo.mkl", str(out), *scripts],
        cwd=tmp_path,
        env=env_without_models(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen: list[str] = []
    finished = threading.Event()

    def poll() -> None:
        while not finished.is_set():
            try:
                seen.append(out.read_text(encoding="utf-8"))
            except FileNotFoundError:
                continue  # not written yet

    reader = threading.Thread(target=poll)
    reader.start()
    try:
        _out, err = writer.communicate(timeout=600)
    finally:
        finished.set()
        reader.join()
    assert writer.returncode == 0, err
    assert len(seen) > 100, len(seen)  # the reader raced the writer many times over
    torn = [len(text) for text in seen if not text.endswith("}\n")]
    assert torn == [], f"{len(torn)} of {len(seen)} reads found part of a line (lengths {sorted(set(torn))[:5]})"
    assert {json.loads(text)["result"] for text in seen} <= set(results.values())
    assert json.loads(out.read_text(encoding="utf-8"))["run"] == "r39-1"


def test_a_path_that_cannot_be_written_is_one_line_and_exit_2_before_anything_runs(tmp_path: Path) -> None:
    (tmp_path / "echo.mkl").write_text(ECHO, encoding="utf-8")
    script = tmp_path / "s.yaml"
    script.write_text('llm: {produce: ["hi"]}\n', encoding="utf-8")
    (tmp_path / "a-folder").mkdir()
    cases = [
        (
            ("--output-file", str(tmp_path / "missing" / "s.json")),
            {},
            f"the folder {tmp_path / 'missing'} does not exist",
        ),
        (("--output-file", str(tmp_path / "a-folder")), {}, "is a folder; name the file to write in it"),
        ((), {"MKL_OUTPUT_FILE": str(tmp_path / "a-folder")}, "MKL_OUTPUT_FILE"),
        (("--output-file", ""), {}, "--output-file: give the path of a file"),
    ]
    for flags, env, said in cases:
        code, status, _stdout, err = mkl_cli(tmp_path, "run", "echo.mkl", "--script", str(script), *flags, env=env)
        assert code == 2, err
        assert err.count("\n") == 1 and err.startswith("mkl: error: ") and said in err, err
        assert status["status"] == "error"
    assert not (tmp_path / ".mkl").exists()  # refused before the run started: no store, no journal
