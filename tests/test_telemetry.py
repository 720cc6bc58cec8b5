"""Runs, calls and approvals as OpenTelemetry traces (issue 54), sent to a real OTLP/HTTP receiver the test starts
(``otlp_receiver``: an ``http.server`` thread decoding each body with opentelemetry-proto), by the ``mkl`` command
as a person runs it: the refund example's span tree with its approval span, one trace across the processes that
advance the run, no ``chat`` span for a call a replay did not make, and no secret in any byte sent."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from openai_stub import Reply, running_stub

from otlp_receiver import Received, otlp_receiver
from support import EXAMPLES, REFUND, REFUND_SCRIPT, Cells, mkl_cli

REFUND_MKL = str(EXAMPLES / "refund.mkl")
DRAFT = "Hello! Your order A-1001 qualifies: we will refund it today."  # what the approver is shown
NO_OTEL = {  # (the environment of the test process must not choose the endpoint or what spans carry)
    "OTEL_EXPORTER_OTLP_ENDPOINT": "",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "",
    "OTEL_EXPORTER_OTLP_HEADERS": "",
    "OTEL_SEMCONV_STABILITY_OPT_IN": "",
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "",
    "OTEL_SDK_DISABLED": "",
    "OTEL_TRACES_EXPORTER": "",
}


def refund(folder: Path, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """``mkl ARGS`` over the refund example's store in ``folder``, scripted: its status line (it must not fail)."""
    code, status, _, err = mkl_cli(
        folder, *args, "--script", str(REFUND_SCRIPT), "--store", "runs.sqlite", env={**NO_OTEL, **(env or {})}
    )
    assert code in (0, 3), err
    return status


def approved_refund(folder: Path, url: str, run_id: str = "r1") -> dict[str, Any]:
    """The README's refund run, stopped at its approval (``--hitl``) and approved by a second ``mkl`` process
    with a note, both exporting to ``url``: the question's status line."""
    asked = refund(folder, "run", REFUND_MKL, "--id", run_id, "--hitl", "--set", "ticket=Parcel broken", "--otel", url)
    assert asked["status"] == "suspended", asked
    note = "checked the photo of the parcel"
    given = ("--question", asked["question_id"], "--reply", "approve", "--note", note, "--as", "dan")
    done = refund(folder, "resume", "--id", run_id, *given, "--otel", url)
    assert done["status"] == "done", done
    return asked


def tree(spans: list[dict[str, Any]]) -> dict[str | None, list[dict[str, Any]]]:
    """Spans by their parent's id (None: roots)."""
    children: dict[str | None, list[dict[str, Any]]] = {}
    for span in spans:
        children.setdefault(span["parent_id"], []).append(span)
    return children


def finished(received: Received) -> list[dict[str, Any]]:
    return received.wait_for(lambda spans: any(span["parent_id"] is None for span in spans))


def test_the_refund_example_is_one_trace_with_its_approval_span(tmp_path: Path) -> None:
    with otlp_receiver() as (url, received):
        asked = approved_refund(tmp_path, url)
        spans = finished(received)
    assert len({span["trace_id"] for span in spans}) == 1  # the resume, another process, continued the trace
    assert len({span["span_id"] for span in spans}) == len(spans)  # each span sent once
    children = tree(spans)
    [run] = children[None]
    assert run["name"] == "invoke_workflow refund"
    assert run["attributes"]["mkl.status"] == "done" and run["attributes"]["gen_ai.operation.name"] == "invoke_workflow"
    ids = {span["span_id"] for span in spans}
    assert all(span["parent_id"] in ids for span in spans if span["parent_id"] is not None)  # no orphan

    visits = {span["name"]: span for span in children[run["span_id"]]}
    assert set(visits) == {"state lookup", "state draft", "state send"}
    [tool] = children[visits["state lookup"]["span_id"]]
    assert tool["name"] == "execute_tool order_lookup"
    assert tool["attributes"]["gen_ai.operation.name"] == "execute_tool"
    assert tool["attributes"]["gen_ai.tool.name"] == "order_lookup"
    under_draft = Counter(span["name"] for span in children[visits["state draft"]["span_id"]])
    assert under_draft == {"chat scripted": 2, "approval": 1}  # the draft, the judge of its gates, the approval
    [send] = children[visits["state send"]["span_id"]]
    chat = send["attributes"]
    assert chat["gen_ai.operation.name"] == "chat" and chat["gen_ai.request.model"] == "scripted"
    assert (chat["gen_ai.usage.input_tokens"], chat["gen_ai.usage.output_tokens"]) == (120, 40)
    assert chat["gen_ai.response.finish_reasons"] == ["stop"]
    assert send["kind"] == 3 and tool["kind"] == 1  # a model call is a client's (OTLP: 3); a tool runs in-process (1)

    [approval] = [span for span in spans if span["name"] == "approval"]
    said = approval["attributes"]
    assert said["mkl.question.id"] == asked["question_id"]
    assert said["mkl.approval.decided_by"] == "person" and said["mkl.approval.decision"] == "approve"
    assert said["mkl.approval.established"] == "os-account" and said["mkl.approval.answerer"]
    assert said["mkl.approval.claimed"] == "dan"  # (the name given with --as, which no one established)
    assert said["mkl.approval.note_given"] is True
    assert said["mkl.approval.subject_sha256"] == hashlib.sha256(DRAFT.encode()).hexdigest()
    assert said["mkl.approval.wait_seconds"] > 0 and approval["end"] > approval["start"]
    assert approval["start"] >= visits["state draft"]["start"]  # asked when the draft's visit ended
    sent = json.dumps(spans)
    assert "checked the photo" not in sent  # the note's presence is said, never the note
    assert "Parcel broken" not in sent and not any(span["events"] for span in spans)  # no content unless asked


def test_a_replay_adds_no_chat_spans(tmp_path: Path) -> None:
    with otlp_receiver() as (url, received):
        approved_refund(tmp_path, url)
        first = finished(received)
        again = refund(
            tmp_path, "run", REFUND_MKL, "--id", "r1", "--hitl", "--set", "ticket=Parcel broken", "--otel", url
        )
        assert again["status"] == "done" and again["calls"]["made"] == 0  # (the whole run replayed)
        approved_refund(tmp_path, url, "r2")  # a second run, whose spans arrive after any the replay sent
        spans = received.wait_for(lambda spans: sum(span["parent_id"] is None for span in spans) == 2)
    [trace] = {span["trace_id"] for span in first}
    replayed = [span for span in spans if span["trace_id"] == trace]
    assert sorted(span["span_id"] for span in replayed) == sorted(span["span_id"] for span in first)
    chats = [span["attributes"]["mkl.position"] for span in spans if span["name"].startswith("chat")]
    assert len(chats) == 6 and len(set(chats)) == 3  # three calls a run, each once; the resume replayed the draft's


@pytest.mark.parametrize("conventions", ["", "gen_ai_latest_experimental"])
def test_no_secret_reaches_a_span_byte_though_content_is_captured(tmp_path: Path, conventions: str) -> None:
    key = "sk-test-SECRET0123456789abcdef"
    token = "hdr-SECRET-9876543210"
    with otlp_receiver() as (url, received):
        env = {
            "OPENAI_API_KEY": key,
            "OTEL_EXPORTER_OTLP_ENDPOINT": url,  # (configured by the environment alone: no --otel)
            "OTEL_EXPORTER_OTLP_HEADERS": f"authorization=Bearer%20{token}",
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true",
            "OTEL_SEMCONV_STABILITY_OPT_IN": conventions,
        }
        ticket = f"ticket=Parcel broken; my key is {key} and the token {token}"
        done = refund(tmp_path, "run", REFUND_MKL, "--id", "s1", "--set", ticket, env=env)
        assert done["status"] == "done"
        spans = finished(received)
    assert all(headers["authorization"] == f"Bearer {token}" for headers in received.headers)  # sent, as asked
    everything = b"".join(received.bodies)
    assert key.encode() not in everything and token.encode() not in everything
    assert b"SECRET" not in everything
    prompts = []
    for span in spans:
        if conventions:
            prompts += [span["attributes"][name] for name in ("gen_ai.input.messages",) if name in span["attributes"]]
        else:
            prompts += [
                attributes["gen_ai.prompt"] for name, attributes in span["events"] if "gen_ai.prompt" in attributes
            ]
    assert any("Parcel broken; my key is ***" in prompt for prompt in prompts)  # the prompt, its secrets masked
    named = "gen_ai.provider.name" if conventions else "gen_ai.system"
    assert all(named in span["attributes"] for span in spans if span["name"].startswith("chat"))


def test_a_bad_endpoint_is_one_line(tmp_path: Path) -> None:
    code, _, _, err = mkl_cli(
        tmp_path, "run", REFUND_MKL, "--script", str(REFUND_SCRIPT), "--set", "ticket=x", "--otel", "ftp://x"
    )
    assert code == 2 and "Traceback" not in err
    assert (
        err.strip()
        .splitlines()[-1]
        .endswith("--otel: an OTLP/HTTP endpoint is an http:// or https:// URL, or off; not 'ftp://x'")
    )


def test_a_receiver_that_is_not_there_is_one_line_without_its_password_and_the_run_ends(tmp_path: Path) -> None:
    """Nothing listens where the traces go: the run is done as ever, and the exporter's retries, each a
    paragraph naming the address, are one line instead, its credentials masked; the command does not wait
    through the retries at its end (the exporter's own timeout would be 10 s)."""
    with socket.socket() as probe:  # a port nothing listens on (bound, then let go)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://alice:pw-{port}-secret@127.0.0.1:{port}/v1/traces"
    code, status, _, err = mkl_cli(
        tmp_path, "run", REFUND_MKL, "--script", str(REFUND_SCRIPT), "--set", "ticket=x", "--otel", url, env=NO_OTEL
    )
    assert code == 0 and status["status"] == "done", err
    said = [line for line in err.splitlines() if "traces could not be sent" in line]
    assert len(said) == 1 and f"127.0.0.1:{port}/v1/traces" in said[0], err
    assert f"pw-{port}-secret" not in err and "Transient error" not in err.replace(said[0], "")
    assert "Traceback" not in err


FAN = """mklang: "0.4"
machine: fan
entry: split
budget: 6
context: { text: "" }
states:
  split:
    structure: A JSON array of topics.
    prompt: "List the topics of: {{text}}"
    output: topics
    parse: list
    gates:
      - { when: otherwise, then: ok, to: each }
  each:
    call: summarize
    over: "{{topics}}"
    input: { topic: "{{item}}" }
    output: parts
    gates:
      - { when: otherwise, then: ok, to: END }
"""
SUMMARIZE = """mklang: "0.4"
machine: summarize
entry: write
budget: 3
context: { topic: "" }
states:
  write:
    structure: One sentence.
    prompt: "Summarize {{topic}}"
    output: summary
    gates:
      - { when: otherwise, then: ok, to: END }
"""


def test_a_fan_out_over_a_sub_machine_has_a_span_per_branch_and_call(tmp_path: Path) -> None:
    (tmp_path / "fan.mkl").write_text(FAN, encoding="utf-8")
    (tmp_path / "summarize.mkl").write_text(SUMMARIZE, encoding="utf-8")
    script = {"llm": {"produce": {"List the topics": '["apples", "pears"]', "Summarize": "A sentence."}}}
    (tmp_path / "fan.script.json").write_text(json.dumps(script), encoding="utf-8")
    with otlp_receiver() as (url, received):
        code, status, _, err = mkl_cli(
            tmp_path, "run", "fan.mkl", "--script", "fan.script.json", "--set", "text=fruit", "--otel", url, env=NO_OTEL
        )
        assert code == 0 and status["status"] == "done", err
        spans = finished(received)
    children = tree(spans)
    [run] = children[None]
    by_name = {span["name"]: span for span in children[run["span_id"]]}
    assert set(by_name) == {"state split", "state each"}
    branches = sorted(children[by_name["state each"]["span_id"]], key=lambda span: span["name"])
    assert [span["name"] for span in branches] == ["branch 0", "branch 1"]
    for branch in branches:
        [call] = children[branch["span_id"]]
        assert call["name"] == "invoke_workflow summarize"
        [visit] = children[call["span_id"]]
        assert visit["name"] == "state write" and visit["attributes"]["mkl.machine"] == "summarize"
        [chat] = children[visit["span_id"]]
        assert chat["name"] == "chat scripted" and chat["start"] >= branch["start"] and chat["end"] <= branch["end"]


def test_a_deadline_decision_is_an_approval_span_a_policy_decided(tmp_path: Path) -> None:
    with otlp_receiver() as (url, received):
        on = {"OTEL_EXPORTER_OTLP_ENDPOINT": url}  # (`mkl tick` exports where the environment says)
        flags = ("--hitl", "--set", "ticket=Parcel broken", "--deadline", "1s", "--on-timeout", "reject")
        asked = refund(tmp_path, "run", REFUND_MKL, "--id", "d1", *flags, env=on)
        limit = time.monotonic() + 60
        while True:  # each tick before the deadline decides nothing
            code, _, out, err = mkl_cli(tmp_path, "tick", "--store", "runs.sqlite", env={**NO_OTEL, **on})
            assert code == 0, out + err
            if "decided by policy" in out:
                break
            assert time.monotonic() < limit, "no tick decided the question"
        spans = finished(received)
    assert len({span["trace_id"] for span in spans}) == 1
    [approval] = [span for span in spans if span["name"] == "approval"]
    said = approval["attributes"]
    assert said["mkl.question.id"] == asked["question_id"]
    assert said["mkl.approval.decided_by"] == "policy" and said["mkl.approval.decision"] == "reject"
    assert "mkl.approval.answerer" not in said and said["mkl.approval.rule"]  # no one's name: the rule's digest
    assert said["mkl.approval.wait_seconds"] >= 1


def test_a_checkpoint_carries_the_trace_to_where_the_run_is_resumed(tmp_path: Path) -> None:
    there = tmp_path / "elsewhere"
    there.mkdir()
    with otlp_receiver() as (url, received):
        flags = ("--hitl", "--set", "ticket=Parcel broken", "--checkpoint", str(tmp_path / "run.json"))
        asked = refund(tmp_path, "run", REFUND_MKL, "--id", "c1", *flags, "--otel", url)
        answer = ("--question", asked["question_id"], "--reply", "approve", "--trust-file", "--otel", url)
        code, status, _, err = mkl_cli(
            there, "resume", str(tmp_path / "run.json"), "--script", str(REFUND_SCRIPT), *answer, env=NO_OTEL
        )
        assert code == 0 and status["status"] == "done", err  # (the file's journal, its trace record in it, read)
        spans = finished(received)
    assert len({span["trace_id"] for span in spans}) == 1
    assert {span["name"] for span in spans} >= {"invoke_workflow refund", "approval", "state send"}


def test_a_notebook_exports_where_its_config_says_and_a_bad_one_is_refused(ip: Cells) -> None:
    ip.define(REFUND)
    assert "otel: an OTLP/HTTP endpoint is an http:// or https:// URL, or off" in str(ip.fails("%mkl config otel=nope"))
    with otlp_receiver() as (url, received):
        ip.run(f"%mkl config otel={url}")
        ip.run(f"r = %mkl run refund --id n1 --script {REFUND_SCRIPT} --set ticket=broken --hitl")
        ip.run("r.submit('approve', by='erin')")  # (the form's road: the handle's oracle, made at the run)
        spans = finished(received)
        ip.run("%mkl config otel=off")
        ip.run(f"%mkl run refund --id n2 --script {REFUND_SCRIPT} --set ticket=broken")
        ip.run(f"%mkl run refund --id n3 --script {REFUND_SCRIPT} --set ticket=broken --otel {url}")  # (this run's own)
        every = received.wait_for(lambda spans: any(span["attributes"].get("mkl.run.id") == "n3" for span in spans))
    assert ip.shell.user_ns["r"].status == "done"
    assert len({span["trace_id"] for span in spans}) == 1 and any(span["name"] == "approval" for span in spans)
    runs = {span["attributes"]["mkl.run.id"] for span in every}
    assert runs == {"n1", "n3"}  # off, n2 sent nothing (spans leave in order: n2's would have come before n3's)


def test_a_run_first_exported_when_resumed_marks_the_visits_it_replayed(tmp_path: Path) -> None:
    asked = refund(tmp_path, "run", REFUND_MKL, "--id", "late", "--hitl", "--set", "ticket=Parcel broken")  # no export
    with otlp_receiver() as (url, received):
        answer = ("--question", asked["question_id"], "--reply", "approve")
        assert refund(tmp_path, "resume", "--id", "late", *answer, "--otel", url)["status"] == "done"
        spans = finished(received)
    children = tree(spans)
    [run] = children[None]
    visits = {span["name"]: span for span in children[run["span_id"]]}
    assert {name for name, span in visits.items() if span["attributes"].get("mkl.replayed")} == {
        "state lookup",
        "state draft",
    }
    assert "mkl.replayed" not in visits["state send"]["attributes"]
    assert visits["state lookup"]["span_id"] not in children  # a replayed call has no span
    assert [span["name"] for span in children[visits["state draft"]["span_id"]]] == ["approval"]
    assert [span["name"] for span in children[visits["state send"]["span_id"]]] == ["chat scripted"]


def test_without_the_sdk_an_asked_export_is_one_line_and_the_environments_alone_is_a_warning(tmp_path: Path) -> None:
    blocked = tmp_path / "no-sdk" / "opentelemetry"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text('raise ImportError("not installed here")\n', encoding="utf-8")
    path = os.pathsep.join([str(blocked.parent), os.environ.get("PYTHONPATH", "")])
    args = ("run", REFUND_MKL, "--script", str(REFUND_SCRIPT), "--set", "ticket=x", "--store", "runs.sqlite")
    code, _, _, err = mkl_cli(tmp_path, *args, "--otel", "http://127.0.0.1:9", env={**NO_OTEL, "PYTHONPATH": path})
    assert code == 2 and "Traceback" not in err
    assert "pip install 'mkl_notebook[otel]'" in err.strip().splitlines()[-1]
    env = {**NO_OTEL, "PYTHONPATH": path, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}
    code, status, _, err = mkl_cli(tmp_path, *args, env=env)
    assert code == 0 and status["status"] == "done", err  # (a variable set for other programs stops no run)
    assert err.count("runs are not traced") == 1


GREET = """mklang: "0.4"
machine: greet
entry: hello
budget: 4
context: { name: world }
states:
  hello:
    structure: A greeting.
    prompt: "Greet {{name}}."
    output: greeting
    gates:
      - { when: otherwise, then: ok, to: END }
"""


def test_a_real_model_call_is_a_chat_span_and_the_key_it_echoes_is_in_no_byte(tmp_path: Path) -> None:
    key = "sk-test-SECRET0123456789abcdef"
    (tmp_path / "greet.mkl").write_text(GREET, encoding="utf-8")
    (tmp_path / "mkl.toml").write_text("backoff = 0.01\n", encoding="utf-8")
    with running_stub() as model, otlp_receiver() as (url, received):
        model.route(
            system="Output contract:",
            replies=[Reply(f"Hello! (my key is {key})", prompt_tokens=31, completion_tokens=7)],
        )
        env = {
            **NO_OTEL,
            "OPENAI_API_KEY": key,
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true",
        }
        flags = ("--model", "openai/gpt-4o-mini", "--api-base", model.url, "--otel", url)
        code, status, _, err = mkl_cli(tmp_path, "run", "greet.mkl", "--set", f"name={key}", *flags, env=env)
        assert code == 0 and status["status"] == "done", err
        spans = finished(received)
        assert any(key in str(request) for request in model.requests)  # (the key went where it belongs)
    [chat] = [span for span in spans if span["name"].startswith("chat")]
    assert chat["name"] == "chat gpt-4o-mini" and chat["attributes"]["gen_ai.system"] == "openai"
    assert (chat["attributes"]["gen_ai.usage.input_tokens"], chat["attributes"]["gen_ai.usage.output_tokens"]) == (
        31,
        7,
    )
    [(_, completion)] = [event for event in chat["events"] if event[0] == "gen_ai.content.completion"]
    assert completion["gen_ai.completion"].startswith("Hello! (my key is ")
    [(_, prompt)] = [event for event in chat["events"] if event[0] == "gen_ai.content.prompt"]
    assert "Greet " in prompt["gen_ai.prompt"]  # (the prompt, which named the key: masked)
    assert key.encode() not in b"".join(received.bodies)


def test_each_row_of_a_map_is_a_trace_of_its_own(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"ticket": f"Parcel {n} broken"}) + "\n" for n in range(3)), encoding="utf-8")
    with otlp_receiver() as (url, received):
        status = refund(tmp_path, "map", REFUND_MKL, "--over", str(rows), "--otel", url)
        spans = received.wait_for(lambda spans: sum(span["parent_id"] is None for span in spans) == 3)
    assert status["counts"] == {"done": 3}
    runs = {span["trace_id"]: span["attributes"]["mkl.run.id"] for span in spans if span["parent_id"] is None}
    assert sorted(runs.values()) == sorted(row["run"] for row in status["rows"])  # a trace per row's run


def test_a_re_run_of_an_edited_machine_sends_no_span_twice(tmp_path: Path) -> None:
    machine = tmp_path / "refund.mkl"
    machine.write_text((EXAMPLES / "refund.mkl").read_text(encoding="utf-8"), encoding="utf-8")
    with otlp_receiver() as (url, received):
        assert (
            refund(tmp_path, "run", str(machine), "--id", "e1", "--set", "ticket=x", "--otel", url)["status"] == "done"
        )
        first = finished(received)
        edited = machine.read_text(encoding="utf-8").replace("Final reply based on", "Final reply, short, based on")
        machine.write_text(edited, encoding="utf-8")
        again = refund(tmp_path, "run", str(machine), "--id", "e1", "--set", "ticket=x", "--otel", url)
        assert again["status"] == "done" and again["calls"]["made"] == 1  # (only the edited state's call)
        spans = received.wait_for(lambda spans: sum(span["name"] == "invoke_workflow refund" for span in spans) == 2)
    assert len({span["span_id"] for span in spans}) == len(spans)  # no span sent twice
    assert len({span["trace_id"] for span in spans}) == 1
    [rerun] = [span for span in spans if span["attributes"].get("mkl.rerun") == 1]
    assert rerun["parent_id"] == next(span["span_id"] for span in first if span["parent_id"] is None)
    children = tree(spans)
    visits = {span["name"]: span for span in children[rerun["span_id"]]}
    assert set(visits) == {"state lookup", "state draft", "state send"}
    assert all(visits[name]["attributes"].get("mkl.replayed") for name in ("state lookup", "state draft"))
    assert [span["name"] for span in children[visits["state send"]["span_id"]]] == ["chat scripted"]
    assert visits["state lookup"]["span_id"] not in children  # its call replayed: no span
