"""Freezing a real run into a scenario file (``mkl test freeze``, ``%mkl freeze``), and ``mkl test`` on it: the
run replays with no model, and after an edit the test names the first request that changed."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from openai_stub import running_stub

from mkl_notebook.lang.located import parse_plain

from support import EXAMPLES, REFUND_ASK, ROOT, Cells, env_without_models

DATA = ROOT / "notebooks" / "data"
TWO_GATES = (DATA / "refund.mkl").read_text(encoding="utf-8")
TWO_GATES_SCRIPT = DATA / "refund.script.yaml"
TICKET = "ticket=My parcel A-1001 arrived broken"
MODEL, FAKE_KEY = "openai/stub-model", "mkltest-5c0ffee1d2a84f15-not-a-real-key"
TOOLS = """import json

import mkl_notebook


@mkl_notebook.tool
def order_lookup(ticket):
    return json.dumps({"order": "A-1001", "refundable": True})
"""


def mkl(folder: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkl_notebook.cli", *args],
        capture_output=True,
        text=True,
        cwd=folder,
        env={**env_without_models(), "LITELLM_LOCAL_MODEL_COST_MAP": "True", **env},
        timeout=300,
        check=False,
    )


def question_of(completed: subprocess.CompletedProcess[str]) -> str:
    found = re.search(r"--question (q-[0-9a-f]+)", completed.stdout)
    assert found, completed.stdout + completed.stderr
    return found.group(1)


def scripted_refund_run(folder: Path) -> None:
    """The README's refund example run in ``folder`` (scripted), its refund approved with a note: run ``r``."""
    shutil.copy(EXAMPLES / "refund.mkl", folder / "refund.mkl")
    script = str(EXAMPLES / "refund.script.yaml")
    asked = mkl(folder, "run", "refund.mkl", "--id", "r", "--hitl", "--script", script, "--set", TICKET)
    assert asked.returncode == 3, asked.stdout + asked.stderr
    question = question_of(asked)
    done = mkl(folder, "resume", "--id", "r", "--script", script, "--question", question, "--reply", "approve",
               "--note", "receipt checked")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def frozen_entries(path: Path) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = parse_plain(path.read_text(encoding="utf-8"))["scenarios"][0]["frozen"]
    return entries


def test_a_refund_run_a_model_answered_is_frozen_and_its_test_asks_the_model_nothing(tmp_path: Path) -> None:
    shutil.copy(EXAMPLES / "refund.mkl", tmp_path / "refund.mkl")
    (tmp_path / "tools.py").write_text(TOOLS, encoding="utf-8")
    with running_stub() as stub:
        stub.route(user="CONDITIONS:", replies=['{"choice": 1}'])  # the draft promises a refund (1-based)
        stub.route(user="Write the reply", replies=["We will refund order A-1001 today."])
        stub.route(user="Final reply", replies=["Order A-1001 is refunded."])
        model = {"MKL_MODEL": MODEL, "MKL_API_BASE": stub.url, "OPENAI_API_KEY": FAKE_KEY}
        secrets = f"{TICKET}, see https://alice:hunter2secret@shop.example/A-1001 (my key: {FAKE_KEY})"
        asked = mkl(tmp_path, "run", "refund.mkl", "--id", "r", "--hitl", "--tools", "tools.py", "--set", secrets,
                    **model)  # fmt: skip
        assert asked.returncode == 3, asked.stdout + asked.stderr
        done = mkl(tmp_path, "resume", "--id", "r", "--tools", "tools.py", "--question", question_of(asked),
                   "--reply", "approve", "--note", "receipt checked", **model)  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        made = len(stub.chat)
        assert made == 3  # draft, its judge, send

        frozen = mkl(tmp_path, "test", "freeze", "r", "-o", "r.test.yaml", **model)
        assert frozen.returncode == 0, frozen.stdout + frozen.stderr
        assert "froze run r (refund, done: 5 answers) into r.test.yaml" in frozen.stdout
        tested = mkl(tmp_path, "test", "refund.mkl", "--script", "r.test.yaml", **model)
        assert tested.returncode == 0, tested.stdout + tested.stderr
        assert tested.stdout.splitlines() == ["PASS refund-r", "1 passed, 0 failed"]
        assert len(stub.chat) == made  # the test asked the model nothing, though one is configured

    text = (tmp_path / "r.test.yaml").read_text(encoding="utf-8")
    kinds = [
        next(key for key in ("tool", "gates", "reply", "prompt") if key in e)
        for e in frozen_entries(tmp_path / "r.test.yaml")
    ]
    assert kinds == ["tool", "prompt", "gates", "reply", "prompt"]
    reply = frozen_entries(tmp_path / "r.test.yaml")[3]
    assert (reply["state"], reply["ask"], reply["reply"], reply["note"]) == (
        "send",
        REFUND_ASK,
        "approve",
        "receipt checked",
    )
    assert "https://***@shop.example/A-1001 (my key: ***)" in text  # a secret the run was given is masked
    for secret in (FAKE_KEY, "hunter2secret", "ed25519", "sig:", "secret", "established", stub.url):
        assert secret not in text
    assert not re.search(r"data-[0-9a-f]{12}", text)  # the run's fence nonces are keyed by its secret
    assert "{" not in text.split("frozen:")[0] and "  - at: root/0:lookup#1/tool\n" in text  # block YAML
    assert yaml.safe_load(text) == parse_plain(text)


def test_one_word_changed_in_a_prompt_fails_naming_that_state_and_the_word(tmp_path: Path) -> None:
    scripted_refund_run(tmp_path)
    assert mkl(tmp_path, "test", "freeze", "r", "-o", "r.test.yaml").returncode == 0
    machine = tmp_path / "refund.mkl"
    machine.write_text(machine.read_text(encoding="utf-8").replace("Write the reply.", "Write the answer."))

    tested = mkl(tmp_path, "test", "refund.mkl", "--script", "r.test.yaml")

    assert tested.returncode == 1
    assert tested.stdout.splitlines() == [
        "FAIL refund-r: the first request that differs from the frozen run: the produce of state 'draft' "
        "(root/1:draft#1/produce): its prompt changed:",
        "    - Write the reply. Offer a refund only if the order allows it.",
        "    + Write the answer. Offer a refund only if the order allows it.",
        "0 passed, 1 failed",
    ]


def test_a_changed_gate_question_fails_naming_the_state_and_the_question(tmp_path: Path) -> None:
    scripted_refund_run(tmp_path)
    assert mkl(tmp_path, "test", "freeze", "r", "-o", "r.test.yaml").returncode == 0
    machine = tmp_path / "refund.mkl"
    text = machine.read_text(encoding="utf-8")
    machine.write_text(text.replace("the reply promises a refund", "the reply offers money back"))

    tested = mkl(tmp_path, "test", "refund.mkl", "--script", "r.test.yaml")

    assert tested.returncode == 1
    assert tested.stdout.splitlines()[0] == (
        "FAIL refund-r: the first request that differs from the frozen run: the judge of state 'draft' "
        "(root/1:draft#1/judge@0): its gate questions changed: - 'the reply promises a refund'; "
        "+ 'the reply offers money back'"
    )


def test_tutorial_two_gate_run_is_frozen_in_the_notebook_and_passes_there(ip: Cells) -> None:
    ip.define(TWO_GATES)
    ip.run(f'%mkl run refund --id two --set ticket="Parcel A-1001 arrived broken" --script {TWO_GATES_SCRIPT}')
    ip.run('import mkl_notebook\nrun = mkl_notebook.get_run("two")\nrun.submit("approve", note="goodwill")')
    ip.run('run.submit("approve")')
    out = ip.tmp / "two.test.yaml"

    ip.run(f"%mkl freeze two -o {out}")
    ip.out.clear()
    ip.run(f"%mkl test refund --script {out}")

    table = ip.out.last("text/plain")["text/plain"]
    assert "refund-two" in table and "PASS" in table and "FAIL" not in table, table
    entries = frozen_entries(out)
    replies = [(e["state"], e["reply"], e.get("note")) for e in entries if "reply" in e]
    assert replies == [("confirm", "approve", "goodwill"), ("release", "approve", None)]
    expect = parse_plain(out.read_text(encoding="utf-8"))["scenarios"][0]["expect"]
    assert expect["status"] == "done" and [step["state"] for step in expect["trace"]] == [
        "draft",
        "confirm",
        "release",
        "send",
    ]
    error = ip.fails(f"%mkl freeze two -o {out}")  # the file is there: nothing is written over it unasked
    assert str(error) == f"{out}: exists; give --force to write over it, or another -o FILE"
    assert "\n" not in str(ip.fails("%mkl freeze nobody"))


def test_a_run_only_a_notebook_carries_is_frozen_from_the_ipynb_writing_no_store(waiting: Path) -> None:
    folder = waiting.parent
    shutil.copy(DATA / "refund.mkl", folder / "refund.mkl")
    out = folder / "waiting.test.yaml"
    out.unlink(missing_ok=True)

    frozen = mkl(folder, "test", "freeze", "r", waiting.name, "-o", out.name)

    assert frozen.returncode == 0, frozen.stdout + frozen.stderr
    assert not (folder / ".mkl").exists()  # read through a scratch store: nothing is written but the file
    expect = parse_plain(out.read_text(encoding="utf-8"))["scenarios"][0]["expect"]
    assert (expect["status"], expect["at"], expect["reply_to"]) == ("suspended", "confirm", "refund_approval")
    tested = mkl(folder, "test", "refund.mkl", "--script", out.name)
    assert tested.returncode == 0, tested.stdout


def test_bad_input_is_one_line_and_a_file_there_is_kept(tmp_path: Path) -> None:
    scripted_refund_run(tmp_path)
    kept = tmp_path / "kept.test.yaml"
    kept.write_text("mine\n", encoding="utf-8")
    (tmp_path / "broken.ipynb").write_text("{", encoding="utf-8")
    said = {
        "unknown run": mkl(tmp_path, "test", "freeze", "nobody", "-o", "x.test.yaml"),
        "unreadable notebook": mkl(tmp_path, "test", "freeze", "r", "broken.ipynb", "-o", "x.test.yaml"),
        "missing notebook": mkl(tmp_path, "test", "freeze", "r", "gone.ipynb", "-o", "x.test.yaml"),
        "existing -o": mkl(tmp_path, "test", "freeze", "r", "-o", kept.name),
        "no -o": mkl(tmp_path, "test", "freeze", "r"),
    }
    for what, completed in said.items():
        assert completed.returncode == 2, what
        assert len(completed.stderr.splitlines()) == 1 and completed.stderr.startswith("mkl: error: "), what
    assert "no run 'nobody'" in said["unknown run"].stderr
    assert "broken.ipynb: is not a notebook" in said["unreadable notebook"].stderr
    assert "give --force" in said["existing -o"].stderr
    assert kept.read_text(encoding="utf-8") == "mine\n" and not (tmp_path / "x.test.yaml").exists()

    forced = mkl(tmp_path, "test", "freeze", "r", "-o", kept.name, "--force")
    assert forced.returncode == 0 and "scenarios:" in kept.read_text(encoding="utf-8")


# Their branch's call failed for want of a scripted answer, which no journal records (a provider's failure is).
UNFROZEN = {"a-failed-item-does-not-stop-the-others", "a-failed-branch-casts-no-vote-and-the-run-goes-on"}


def test_every_shipped_scenario_run_durably_freezes_into_a_test_that_passes() -> None:
    """Fan-outs, calls, repairs, refusals and replies: each stdlib, example and conformance scenario, run as a
    durable run and frozen from its journal, passes as a frozen scenario."""
    from mkl_notebook.app.freezing import frozen_text
    from mkl_notebook.app.scenarios import (
        load_cases,
        load_scenarios,
        run_scenario,
        scenario_options,
        scenarios_from_mapping,
    )
    from mkl_notebook.durable import runs as durable
    from mkl_notebook.durable.stores import MemoryStore
    from mkl_notebook.providers.scripted import oracle_from_script

    shipped = [
        *(
            scenario
            for machine in [*sorted((ROOT / "mkl_notebook" / "stdlib").glob("*.mkl")), EXAMPLES / "refund.mkl"]
            for scenario in load_scenarios(machine, machine.with_suffix(".test.yaml"))
        ),
        *load_cases(sorted((ROOT / "tests" / "conformance" / "cases").glob("*.yaml"))),
    ]
    failed = []
    for scenario in shipped:
        if scenario.name in UNFROZEN:
            continue
        store = MemoryStore()
        durable.start(
            scenario.machine,
            oracle_from_script(dict(scenario.script)),
            store=store,
            run_id="r",
            registry=scenario.registry,
            input=dict(scenario.input),
            context=dict(scenario.context),
            options=scenario_options(scenario.run, scenario.name),
        )
        outcome = durable.read_run("r", store.read("r"), known=dict(scenario.registry))
        frozen = scenarios_from_mapping(scenario.machine, parse_plain(frozen_text(outcome)), scenario.registry, "f")
        tested = run_scenario(frozen[0])
        if not tested.passed:
            failed.append(f"{scenario.source} {scenario.name}: {tested.why}")
    assert len(shipped) > 80
    assert not failed, "\n".join(failed)


def test_a_notebook_run_no_trusted_key_sealed_is_frozen_only_when_asked(tmp_path: Path) -> None:
    for name in ("shared-approval.ipynb", "refund.mkl"):
        shutil.copy(DATA / name, tmp_path / name)

    refused = mkl(tmp_path, "test", "freeze", "shared-refund", "shared-approval.ipynb", "-o", "s.test.yaml")
    assert refused.returncode == 2 and len(refused.stderr.splitlines()) == 1
    assert "signed as 'alice'" in refused.stderr and "--trust-file" in refused.stderr
    assert not (tmp_path / "s.test.yaml").exists()

    taken = mkl(
        tmp_path, "test", "freeze", "shared-refund", "shared-approval.ipynb", "-o", "s.test.yaml", "--trust-file"
    )
    assert taken.returncode == 0, taken.stderr
    assert mkl(tmp_path, "test", "refund.mkl", "--script", "s.test.yaml").returncode == 0


def test_an_edited_route_names_the_first_request_the_frozen_run_never_made(tmp_path: Path) -> None:
    scripted_refund_run(tmp_path)
    assert mkl(tmp_path, "test", "freeze", "r", "-o", "r.test.yaml").returncode == 0
    machine = tmp_path / "refund.mkl"
    text = machine.read_text(encoding="utf-8")
    machine.write_text(
        text.replace("{ when: otherwise, then: ok, to: draft }", "{ when: otherwise, then: ok, to: send }")
    )

    tested = mkl(tmp_path, "test", "refund.mkl", "--script", "r.test.yaml")

    assert tested.returncode == 1
    assert tested.stdout.splitlines()[0] == (
        "FAIL refund-r: the first request that differs from the frozen run: state 'send' asks for a produce "
        "(root/1:send#1/produce) the frozen run holds no answer for: the route changed before it"
    )
    frozen = (tmp_path / "r.test.yaml").read_text(encoding="utf-8")
    (tmp_path / "mixed.test.yaml").write_text(frozen.replace("    frozen:\n", "    llm: {judge: [0]}\n    frozen:\n"))
    mixed = mkl(tmp_path, "test", "refund.mkl", "--script", "mixed.test.yaml")
    assert mixed.returncode == 2 and len(mixed.stderr.splitlines()) == 1
    assert "scenario 'refund-r' answers from 'frozen', so it takes no llm" in mixed.stderr
