"""One advance of a run as spans: plain data, built from the calls it made and what its journal says it decided.

The tree follows the positions the engine gives every request (``root/3:draft#2/produce``,
``…/call:sub/0:look#1/tool``, ``…/branch:1/produce``): the run's span (``invoke_workflow``), a span per state visit,
per sub-machine call and per fan-out branch, and under them a ``chat`` span per model call, an ``execute_tool`` span
per tool or hook call, and an ``approval`` span per human gate decided. A visit's, call's or branch's span has an id
derived from the trace and its position, so a later advance (a resume, in another process) hangs its spans under the
one an earlier advance exported, and never exports it twice: a container whose calls were replayed is not exported
again, and a replayed call gets no span. Only the first advance of a run's trace (the run was advanced before with
export off) exports the visits it replayed, marked ``mkl.replayed``, with no call spans under them; so does the first
advance of a re-run with a changed setup, whose spans (ids salted by the re-run's number) hang under a run span of
its own, a child of the run's first.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..engine.oracle import Advanced, JudgeAnswer, JudgeRequest, OracleRequest, ProduceAnswer, ProduceRequest

_VISIT = re.compile(r"^(\d+):(.+)#(\d+)$")
# A call that is not a model's: what its span is called, and whether it is a hook.
_HOST_KINDS = ("tool", "hook")


@dataclass
class Span:
    """One finished span: ids in hex, times in nanoseconds since the epoch."""

    name: str
    span_id: str
    parent_id: str | None
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    events: list[tuple[str, int, dict[str, Any]]] = field(default_factory=list)
    error: str | None = None
    client: bool = False  # a call to a model's service (SpanKind CLIENT); else INTERNAL


@dataclass(frozen=True)
class Call:
    """A request the run's oracle was asked, timed: made live (``answer`` or ``error``), or ``replayed``."""

    request: OracleRequest
    start_ns: int
    end_ns: int
    answer: Any = None
    error: str | None = None
    replayed: bool = False


@dataclass(frozen=True)
class Conventions:
    """What spans carry: prompts and answers only with ``capture``; the newest GenAI names with ``latest``;
    every text first through ``scrub`` (which masks the secrets it knows)."""

    capture: bool = False
    latest: bool = False
    scrub: Callable[[str], str] = str


def container_id(trace_id: str, path: str) -> str:
    """The span id of the visit, call or branch at ``path`` of the run whose trace is ``trace_id``."""
    digest = hashlib.sha256(f"{trace_id}/{path}".encode()).hexdigest()[:16]
    return digest if int(digest, 16) else "0000000000000001"


def _containers(position: str, machine: str) -> list[tuple[str, str, dict[str, Any]]]:
    """The visits, calls and branches a request at ``position`` is inside, outermost first: path, name, attributes."""
    parts = position.split("/")
    path = parts[0]
    found = []
    for part in parts[1:-1]:
        path = f"{path}/{part}"
        visit = _VISIT.match(part)
        if visit:
            attributes = {"mkl.machine": machine, "mkl.state": visit[2], "mkl.visit": int(visit[3])}
            found.append((path, f"state {visit[2]}", attributes))
        elif part.startswith("call:"):
            machine = part[len("call:") :]
            found.append((path, f"invoke_workflow {machine}", {"gen_ai.operation.name": "invoke_workflow"}))
        elif part.startswith("branch:"):
            found.append((path, f"branch {part[len('branch:') :]}", {"mkl.branch": int(part[len("branch:") :])}))
    for path, _, attributes in found:
        attributes["mkl.position"] = path
    return found


def _provider(model: str | None) -> str:
    return model.split("/", 1)[0] if model and "/" in model else "_OTHER"


def _model_name(model: str) -> str:
    """A litellm model without its provider (``openai/gpt-4o-mini`` → ``gpt-4o-mini``), as the conventions name it."""
    return model.split("/", 1)[1] if "/" in model else model


def _model_attributes(call: Call, conventions: Conventions) -> dict[str, Any]:
    answer = call.answer
    model = getattr(answer, "model", None) or "unknown"
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name" if conventions.latest else "gen_ai.system": _provider(model),
        "gen_ai.request.model": _model_name(model),
        "mkl.kind": call.request.kind,
    }
    if isinstance(call.request, ProduceRequest):
        attributes["mkl.tier"] = call.request.tier
        attributes["gen_ai.request.temperature"] = call.request.temperature
    if isinstance(answer, (ProduceAnswer, JudgeAnswer)):
        attributes["gen_ai.response.model"] = _model_name(model)
        attributes["gen_ai.usage.input_tokens"] = answer.input_tokens
        attributes["gen_ai.usage.output_tokens"] = answer.output_tokens
        truncated = isinstance(answer, ProduceAnswer) and answer.truncated
        attributes["gen_ai.response.finish_reasons"] = ["length" if truncated else "stop"]
        if answer.cost_usd is not None:
            attributes["mkl.cost_usd"] = answer.cost_usd
    return attributes


def _said(request: OracleRequest, answer: Any) -> tuple[str, str]:
    """What a model was asked and what it answered, as text."""
    if isinstance(request, ProduceRequest):
        asked = "\n\n".join([*(text for _, text in request.conversation), request.user])
        return asked, answer.text if isinstance(answer, ProduceAnswer) else ""
    if isinstance(request, JudgeRequest):
        asked = json.dumps({"output": request.output, "conditions": list(request.conditions)})
        return asked, "" if not isinstance(answer, JudgeAnswer) else json.dumps({"choice": answer.choice})
    return "", ""


def _content(span: Span, call: Call, conventions: Conventions) -> None:
    """Prompts and answers, scrubbed, as the chosen conventions carry them (only with content capture on)."""
    scrub = conventions.scrub
    if call.request.kind in _HOST_KINDS:
        span.attributes["gen_ai.tool.call.arguments"] = scrub(getattr(call.request, "input_json", ""))
        if call.error is None:
            span.attributes["gen_ai.tool.call.result"] = scrub(json.dumps(call.answer, default=str))
        return
    asked, answered = (scrub(text) for text in _said(call.request, call.answer))
    if conventions.latest:
        finish = span.attributes.get("gen_ai.response.finish_reasons", ["stop"])[0]
        span.attributes["gen_ai.input.messages"] = json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": asked}]}]
        )
        span.attributes["gen_ai.output.messages"] = json.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": answered}], "finish_reason": finish}]
        )
    else:
        span.events.append(("gen_ai.content.prompt", call.start_ns, {"gen_ai.prompt": asked}))
        span.events.append(("gen_ai.content.completion", call.end_ns, {"gen_ai.completion": answered}))


def _call_span(call: Call, parent: str | None, conventions: Conventions) -> Span:
    request = call.request
    if request.kind in _HOST_KINDS:
        name = str(getattr(request, "name", ""))
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.type": "function",
        }
        if request.kind == "hook":
            attributes["mkl.hook"] = True
        else:
            attributes["mkl.tool.effect"] = str(getattr(request, "effect", ""))
        title = f"execute_tool {name}"
    else:
        attributes = _model_attributes(call, conventions)
        title = f"chat {attributes['gen_ai.request.model']}"
    attributes["mkl.position"] = request.position
    error = None if call.error is None else conventions.scrub(call.error)
    if error is not None:
        attributes["error.type"] = "mkl.call_failed"
    span = Span(title, os.urandom(8).hex(), parent, call.start_ns, call.end_ns, attributes, error=error)
    span.client = request.kind not in _HOST_KINDS
    if conventions.capture:
        _content(span, call, conventions)
    return span


def _word(value: Any) -> bool:
    """Whether a decision is a word (approve, reject, escalate, a choice), not text a person wrote."""
    return isinstance(value, bool) or (isinstance(value, str) and len(value) <= 40 and value.isidentifier())


def _approval_span(decided: dict[str, Any], parent: str | None, now_ns: int, conventions: Conventions) -> Span:
    scrub = conventions.scrub
    end = int(float(decided.get("decided_at") or now_ns / 1e9) * 1e9)
    start = int(float(decided["asked_at"]) * 1e9) if decided.get("asked_at") else end
    attributes: dict[str, Any] = {
        "mkl.question.id": str(decided.get("question") or ""),
        "mkl.position": str(decided.get("position") or ""),
        "mkl.approval.decided_by": decided["decided_by"],
        "mkl.approval.note_given": bool(decided.get("note")),
        "mkl.approval.wait_seconds": round(max(0, end - start) / 1e9, 3),
    }
    decision = decided.get("decision")
    if conventions.capture or _word(decision):  # (a person's free text, an ask_human answer, is content)
        attributes["mkl.approval.decision"] = scrub(decision if isinstance(decision, str) else json.dumps(decision))
    for key in ("answerer", "established", "claimed", "subject_sha256", "rule"):
        if decided.get(key):
            attributes[f"mkl.approval.{key}"] = scrub(str(decided[key]))
    return Span("approval", os.urandom(8).hex(), parent, start, max(start, end), attributes)


def advance_spans(advance: Advanced, calls: Sequence[Call], conventions: Conventions, now_ns: int = 0) -> list[Span]:
    """The spans of one advance of a run (see the module's docstring): ``calls`` are the requests its oracle was
    asked, in any order; ``now_ns`` ends an approval whose decision has no time."""
    if advance.trace is None:
        return []
    trace_id, first_run_span = advance.trace
    new_trace = advance.new_trace
    salt = f"rerun-{advance.rerun}/" if advance.rerun else ""  # (a re-run's spans are its own, under its own run)
    run_span = container_id(trace_id, f"{salt}run") if advance.rerun else first_run_span
    made = [call for call in calls if not call.replayed and call.request.kind != "reply"]
    replayed = {path for call in calls if call.replayed for path, _, _ in _containers(call.request.position, "")}
    containers: dict[str, Span] = {}
    spans: list[Span] = []

    def parent_of(position: str, start: int, end: int) -> str:
        parent = run_span
        for path, name, attributes in _containers(position, advance.machine):
            span_id = container_id(trace_id, salt + path)
            if path not in replayed or new_trace:
                known = containers.get(path)
                if known is None:
                    known = containers[path] = Span(name, span_id, parent, start, end, dict(attributes))
                    if path in replayed:
                        known.attributes["mkl.replayed"] = True
                known.start_ns, known.end_ns = min(known.start_ns, start), max(known.end_ns, end)
            parent = span_id
        return parent

    for call in made:
        spans.append(_call_span(call, parent_of(call.request.position, call.start_ns, call.end_ns), conventions))
    for decided in advance.decided:
        position = str(decided.get("position") or "root/x")
        approval = _approval_span(decided, None, now_ns, conventions)
        approval.parent_id = parent_of(position, approval.end_ns, approval.end_ns)
        spans.append(approval)
    if new_trace:  # visits replayed from before the trace began: shown once, marked, with no calls under them
        for call in calls:
            if call.replayed:
                parent_of(call.request.position, call.start_ns, call.end_ns)
    if advance.wrote and advance.status in ("done", "halt"):  # (a pure replay of an ended run: its span was sent)
        error = None if advance.error is None else conventions.scrub(advance.error)
        spans.append(_run_span(advance, run_span, error))
        if advance.rerun:
            spans[-1].parent_id = first_run_span
            spans[-1].attributes["mkl.rerun"] = advance.rerun
    every = [*containers.values(), *spans]
    for span in every:  # (a run's spans found by its id, though its own span comes only when it ends)
        span.attributes["mkl.run.id"] = advance.run_id
    return every


def _run_span(advance: Advanced, span_id: str, error: str | None) -> Span:
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_workflow",
        "mkl.run.id": advance.run_id,
        "mkl.machine": advance.machine,
        "mkl.status": advance.status,
    }
    start, end = int(advance.started * 1e9), int(advance.ended * 1e9)
    return Span(f"invoke_workflow {advance.machine}", span_id, None, start, max(start, end), attributes, error=error)
