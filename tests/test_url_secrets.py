"""Keys in an ``--api-base`` URL (its query, its path, its ``user:password@``) and a streamed echo of a key
reach nothing a person sees or a run writes.

The canary kit's way: unique canaries go into the URL (and the API key into the environment) of real runs
against the local OpenAI-compatible stub (``tests/openai_stub.py``; nothing reaches the internet), whose
error bodies echo the URL they were asked at; then every byte of every file under the test's folder, and
everything printed, is searched for them.
"""

from __future__ import annotations

import base64
import itertools
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest
from IPython.utils.capture import capture_output
from lab_client import run_all
from openai_stub import Reply, StubServer, running_stub

from mkl_notebook.notebook import display
from mkl_notebook.providers.secrets import scrub, shown_so_far, shown_url, url_secrets

from support import RUN_MIME, Cells, env_without_models, mkl_on_a_terminal

MODEL = "openai/stub-model"
API_KEY = "mkltest-5e0c7a93d1f84b26-not-a-real-key"
QUERY_CANARY = "QryCanary4f1e9b07d2"  # the value of ?key=
PATH_CANARY = "PathCanary8c3d5a61e0f24b97"  # the segment after /key/
SHAPED_CANARY = "9Zt4Kq7Wm2Xr8Pv5Ns3Lb6Hd"  # a key-shaped segment under no name
PASSWORD = "Pw-Canary-5b8e2d71a9"
CANARIES = (API_KEY, QUERY_CANARY, PATH_CANARY, SHAPED_CANARY, PASSWORD)

GREET = """\
mklang: "0.4"
machine: greet
entry: hello
budget: 4
result: greeting
context:
  name: world
states:
  hello:
    structure: A greeting.
    prompt: "Greet {{name}}."
    output: greeting
    gates:
      - { when: otherwise, then: ok, to: END }
"""


@pytest.fixture(scope="module")
def stub_server() -> Iterator[StubServer]:
    with running_stub() as server:
        yield server


@pytest.fixture
def stub(stub_server: StubServer) -> StubServer:
    stub_server.reset()
    return stub_server


def _env(**extra: str) -> dict[str, str]:
    """This environment without model settings, with the API key and an offline litellm."""
    return {
        **env_without_models(),
        "OPENAI_API_KEY": API_KEY,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "PYTHONUNBUFFERED": "1",
        **extra,
    }


def _files_under(folder: Path) -> bytes:
    """Every byte of every file under ``folder``: stores and their logs, checkpoints, notebooks, logs."""
    return b"".join(path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file())


def _leaks(text: str | bytes) -> list[str]:
    """The canaries found in ``text``."""
    data = text.encode() if isinstance(text, str) else text
    return [canary for canary in CANARIES if canary.encode() in data]


def _mkl(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkl_notebook.cli", *args],
        cwd=folder,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


# -- the command line ------------------------------------------------------------------------------------


def test_keys_in_an_api_base_reach_no_output_and_no_file_of_mkl_run(stub: StubServer, tmp_path: Path) -> None:
    """Runs that succeed, are suspended and find no route, through URLs that carry keys in their path and
    query, against a server whose answers and error bodies name the URL it was asked at."""
    (tmp_path / "greet.mkl").write_text(GREET, encoding="utf-8")
    (tmp_path / "mkl.toml").write_text("retries = 0\nbackoff = 0.01\n", encoding="utf-8")
    path_base = f"{stub.url}/gw/{SHAPED_CANARY}/key/{PATH_CANARY}"
    stub.default = Reply(f"Hello! (you called me at {path_base})")
    stub.route(user="\ndown\n", replies=[Reply(status=503, error_message="overloaded at {path}")])
    runs = {
        "fine": (path_base, "world", ()),
        "down": (path_base, "down", ("--suspend",)),
        "lost": (f"{stub.url}?key={QUERY_CANARY}&api-version=2024", "world", ()),
    }
    printed = {}
    for run_id, (api_base, name, flags) in runs.items():
        done = _mkl(
            tmp_path,
            "run",
            "greet.mkl",
            "--model",
            MODEL,
            "--api-base",
            api_base,
            "--set",
            f"name={name}",
            "--id",
            run_id,
            "--checkpoint",
            f"{run_id}.json",
            *flags,
        )
        printed[run_id] = done.stdout + done.stderr
        assert "Traceback" not in printed[run_id], printed[run_id]
    status = {run_id: json.loads(text.strip().splitlines()[-1]) for run_id, text in printed.items()}

    # The runs went as meant, and each answer or error named the URL it was asked at, masked.
    assert status["fine"]["status"] == "done", printed["fine"]
    assert status["fine"]["result"] == f"Hello! (you called me at {stub.url}/gw/***/key/***)"
    assert status["down"]["status"] == "suspended"
    assert "overloaded at /v1/gw/***/key/***/chat" in status["down"]["error"]
    assert "mkl resume --id down --model openai/stub-model\n" in printed["down"]  # to continue: no address
    assert status["lost"]["status"] == "halt" and "no route /v1/?key=***" in status["lost"]["error"]
    # The test means something: every canary of a URL did reach the server, and the key was sent.
    asked = " ".join(request.path for request in stub.requests)
    assert all(canary in asked for canary in (PATH_CANARY, QUERY_CANARY, SHAPED_CANARY)), asked
    assert all(request.headers.get("authorization") == f"Bearer {API_KEY}" for request in stub.requests)

    assert {run_id: _leaks(text) for run_id, text in printed.items()} == {run_id: [] for run_id in runs}
    assert (tmp_path / ".mkl" / "runs.sqlite").exists() and (tmp_path / "down.json").exists()
    assert _leaks(_files_under(tmp_path)) == []


def test_a_usage_error_of_the_command_line_never_repeats_a_url_key(tmp_path: Path) -> None:
    (tmp_path / "greet.mkl").write_text(GREET, encoding="utf-8")
    done = _mkl(tmp_path, "run", "greet.mkl", "--api-bsae", f"http://alice:{PASSWORD}@h/v1/key/{PATH_CANARY}")
    assert done.returncode == 2 and "unrecognized arguments: --api-bsae http://***@h/v1/key/***" in done.stderr
    assert _leaks(done.stdout + done.stderr) == []


# -- a streamed echo on a terminal ---------------------------------------------------------------------------


def test_a_streamed_echo_of_a_key_never_shows_a_piece_of_it_on_the_terminal(stub: StubServer, tmp_path: Path) -> None:
    """The answer echoes the API key, and a URL key, three characters a chunk: the terminal's live text
    never holds eight characters of either, and the answer arrives masked."""
    answer = f"Your key is {API_KEY} and your gateway {stub.url}/key/{PATH_CANARY} at your service."
    stub.route(system="Output contract:", replies=[Reply(content=answer, chunk_size=3, chunk_delay=0.01)])
    (tmp_path / "greet.mkl").write_text(GREET, encoding="utf-8")
    args = ["run", "greet.mkl", "--model", MODEL, "--api-base", f"{stub.url}/key/{PATH_CANARY}", "--id", "echo"]
    shown = mkl_on_a_terminal(args, tmp_path, _env(COLUMNS="200"))

    streamed = shown.split("── hello ──\n", 1)[1].split("\n\n", 1)[0]  # the live text, before the trace
    assert streamed == f"Your key is *** and your gateway {stub.url}/key/*** at your service.", shown
    for secret in (API_KEY, PATH_CANARY):
        pieces = {secret[at : at + 8] for at in range(len(secret) - 7)}
        assert not [piece for piece in pieces if piece in shown], shown
    [request] = stub.produce_requests
    assert request.body["stream"] is True  # it was streamed, in chunks of three characters
    assert _leaks(_files_under(tmp_path)) == []


def test_a_streamed_echo_of_a_key_never_shows_a_piece_of_it_on_the_notebooks_live_line(
    ip: Cells, stub: StubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same echo in a notebook: no live line drawn while the answer arrives (each text it is told is drawn)
    holds eight characters of the key, and the answer was drawn growing."""
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.setattr(display, "LIVE_INTERVAL", 0.0)  # every text the live line is told is drawn
    answer = f"Your key is {API_KEY} and that is all there is to say about it today."
    stub.route(system="Output contract:", replies=[Reply(content=answer, chunk_size=3, chunk_delay=0.05)])
    ip.run(f"%mkl config model={MODEL} api_base={stub.url}")
    ip.define(GREET)
    ip.out.clear()
    ip.run("%mkl run greet")

    live = [p.data["text/plain"] for p in ip.out.published if str(p.data.get("text/plain", "")).startswith("running")]
    writing = [text.split("\n", 1)[1].strip() for text in live if "writing" in text and "\n" in text]
    assert len(set(writing)) >= 3, live  # drawn growing, a few characters at a time
    pieces = {API_KEY[at : at + 8] for at in range(len(API_KEY) - 7)}
    assert not [text for text in live if any(piece in text for piece in pieces)], live
    assert _leaks(json.dumps([p.data for p in ip.out.published], default=str)) == []


# -- notebooks ---------------------------------------------------------------------------------------------------


def test_a_notebook_shows_and_saves_no_key_of_its_api_base(stub: StubServer, tmp_path: Path) -> None:
    """Restart & Run All of a notebook whose server address carries keys (read from the environment, so the
    cells' own text holds none): its config and models listings, a run that succeeds, one refused and one
    that finds no route; then the saved file, the store and the kernel's outputs hold no canary."""
    stub.route(user="\nworld\n", replies=["Hello, world!"])
    stub.route(user="\nrefused\n", replies=[Reply(status=401, error_message="invalid key in {path}")])
    path_base = f"http://alice:{PASSWORD}@127.0.0.1:{stub.port}/v1/key/{PATH_CANARY}"
    query_base = f"{stub.url}?api_key={QUERY_CANARY}"
    notebook = tmp_path / "keys.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext mkl_notebook"),
        nbformat.v4.new_code_cell(
            "import os\npath_base, query_base = (os.environ[v] for v in ('PATH_BASE', 'QUERY_BASE'))"
        ),
        nbformat.v4.new_code_cell(f"%mkl config model={MODEL} retries=0 api_base=$path_base"),
        nbformat.v4.new_code_cell("%mkl config"),
        nbformat.v4.new_code_cell("%mkl models"),
        nbformat.v4.new_code_cell("%%mkl\n" + GREET),
        nbformat.v4.new_code_cell("%mkl run greet --id fine"),
        nbformat.v4.new_code_cell("%mkl run greet --id refused --set name=refused"),
        nbformat.v4.new_code_cell("%mkl config api_base=$query_base"),
        nbformat.v4.new_code_cell("%mkl config"),
        nbformat.v4.new_code_cell("%mkl run greet --id lost"),
    ]
    nbformat.write(nb, notebook)
    run_all(notebook, allow_errors=True, env=_env(PATH_BASE=path_base, QUERY_BASE=query_base))

    saved = nbformat.read(notebook, as_version=4)
    outputs = [output for cell in saved.cells for output in cell.get("outputs", [])]
    texts = json.dumps(outputs)
    assert "api_base=http://***@127.0.0.1" in texts and "/v1/key/***" in texts  # %mkl config, masked
    assert f"api_base={stub.url}?api_key=***" in texts
    views = [output["data"][RUN_MIME] for output in outputs if RUN_MIME in output.get("data", {})]
    assert len(views) >= 3, texts
    assert "invalid key in /v1/key/***/chat" in texts and "no route /v1/?api_key=***" in texts
    asked = " ".join(request.path for request in stub.requests)
    assert PATH_CANARY in asked and QUERY_CANARY in asked  # the keys did go to the server
    assert _leaks(_files_under(tmp_path)) == []


def test_magic_listings_and_usage_errors_never_repeat_a_url_key(ip: Cells) -> None:
    """In a real IPython shell: ``%mkl config``, ``%mkl models``, and usage errors that repeat the line."""
    address = f"http://alice:{PASSWORD}@models.example:8080/v1/key/{PATH_CANARY}?sig={QUERY_CANARY}"
    with capture_output() as shown:
        ip.run(f"%mkl config model={MODEL} api_base={address}")
        ip.run("%mkl models")
    assert "api_base=http://***@models.example:8080/v1/key/***?sig=***" in shown.stdout
    assert _leaks(shown.stdout + shown.stderr) == []
    ip.define(GREET)
    errors = [
        ip.fails(f"%mkl run greet --api-base {address}"),
        ip.fails(f"%mkl config {address}"),
        ip.fails(f"%mkl run greet --set 'unclosed {address}"),
    ]
    assert "unrecognized arguments: --api-base http://***@models.example" in str(errors[0])
    assert [_leaks(str(error)) for error in errors] == [[], [], []], errors
    assert _leaks(json.dumps([p.data for p in ip.out.published], default=str)) == []


# -- the pieces ------------------------------------------------------------------------------------------------


def test_shown_url_masks_every_key_a_url_carries_and_keeps_the_rest_readable() -> None:
    assert shown_url(f"http://h:8000/v1?key={QUERY_CANARY}") == "http://h:8000/v1?key=***"
    assert shown_url(f"https://h/v1?api-version=2024-06&ApiKey={QUERY_CANARY}&x=1") == (
        "https://h/v1?api-version=2024-06&ApiKey=***&x=1"
    )
    assert shown_url("https://h/v1?access_token=a&signature=b&password=c") == (
        "https://h/v1?access_token=***&signature=***&password=***"
    )
    assert shown_url(f"http://u:{PASSWORD}@h/gw/{SHAPED_CANARY}/v1/key/{PATH_CANARY}/x") == (
        "http://***@h/gw/***/v1/key/***/x"
    )
    assert shown_url("http://h/v1/sk-abcdefgh12345678/chat") == "http://h/v1/***/chat"
    for plain in ("http://127.0.0.1:8000/v1", "https://h/openai/deployments/gpt-4o-mini-2024-07-18?api-version=1"):
        assert shown_url(plain) == plain
    found = url_secrets(f"http://u:{PASSWORD}@h/v1/key/{PATH_CANARY}?token={QUERY_CANARY}&auth=true")
    assert {PASSWORD, PATH_CANARY, QUERY_CANARY} <= set(found) and "true" not in found


def test_scrub_masks_url_keys_and_echoes_that_lost_a_character_at_an_edge() -> None:
    address = f"http://alice:{PASSWORD}@h/v1/key/{PATH_CANARY}?key={QUERY_CANARY}"
    basic = base64.b64encode(f"alice:{PASSWORD}".encode()).decode()
    shifted = base64.b64encode(f"lice:{PASSWORD}".encode()).decode()  # the pair from its second character on
    echoes = {
        "basic-auth header missing its first character": f"Authorization: {basic[1:]}",
        "basic-auth header missing its last character": f"header={basic[:-1]};",
        "base64 of the pair missing its first character": f"got {shifted}",
        "password missing its first character": f"password {PASSWORD[1:]} is wrong",
        "password missing its last character": f"password '{PASSWORD[:-1]}' is wrong",
        "path key missing a character at each edge": f"no route for {PATH_CANARY[1:-1]}",
        "query key in a path": f"no route /v1/?key={QUERY_CANARY}chat/completions",
        "API key missing its first character": f"key {API_KEY[1:]} refused",
    }
    for what, text in echoes.items():
        clean = scrub(text, url_secrets(address), env={"OPENAI_API_KEY": API_KEY})
        assert "***" in clean, what
        for secret in (basic, shifted, PASSWORD, PATH_CANARY, QUERY_CANARY, API_KEY):
            assert not [secret[at : at + 12] for at in range(len(secret) - 11) if secret[at : at + 12] in clean], (
                what,
                clean,
            )
    assert scrub("a short pw and an ordinary sentence", ["pw12"], env={}) == "a short pw and an ordinary sentence"


def test_a_streamed_text_is_shown_only_as_far_as_no_piece_of_a_secret_shows() -> None:
    """Every prefix of an answer that echoes the key, whole and missing its first character, and a URL."""
    secrets = url_secrets(f"http://h/v1/key/{PATH_CANARY}")
    answer = f"It is {API_KEY}, or «{API_KEY[1:]}», at http://h/v1/key/{PATH_CANARY}?token={QUERY_CANARY} — bye"
    env = {"OPENAI_API_KEY": API_KEY}
    shown = [shown_so_far(answer[:end], secrets, env) for end in range(len(answer) + 1)]
    for text in shown:
        for secret in (API_KEY, PATH_CANARY, QUERY_CANARY):
            assert not [secret[at : at + 8] for at in range(len(secret) - 7) if secret[at : at + 8] in text], text
    assert all(later.startswith(earlier) for earlier, later in itertools.pairwise(shown))  # it only ever grows
    assert shown[-1] == "It is ***, or «***», at http://h/v1/key/***?token=*** — "  # the last word is still held
    assert scrub(answer, secrets, env) == shown[-1] + "bye"
