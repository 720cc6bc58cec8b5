#!/usr/bin/env python
"""Differential tester: mkl_notebook against the reference interpreter (mklang 1.4.0).

A developer tool, not part of the test suite. The reference is never a dependency
of the project: it lives in a separate virtualenv that also has this project
installed editable, so that one Python process can import both::

    python3 -m venv /tmp/refvenv
    /tmp/refvenv/bin/pip install mklang==1.4.0
    /tmp/refvenv/bin/pip install -e /work/main
    /tmp/refvenv/bin/python benchmarks/differential.py --seed 1 --count 2000

It generates random conformance cases (docs/language.md §8: ``machine``, ``registry``,
``llm``, ``tools``, ``hooks``, ``input``, ``context``, ``run``), runs each one through
both engines' scripted scenario runners, and compares the outcome: status, error,
result, at, ask, reply_to, usage, context (JSON-normalised), diagnosis and the
trace (the keys in ``STEP_KEYS``, ``sub_trace`` recursively; an absent key reads as
null, as in an ``expect:`` skeleton). Every diverging case is written to
``--out`` (default /tmp/divergences) as ``NNN.yaml``, a conformance case whose
``expect`` is the reference's outcome, with both full results appended as
comments; ``--minimize`` also shrinks the first case of every divergence group to
``min-<group>.yaml``.

Fan-out branches share the scripted queues (produce list, judge list, hook and
tool sequences). The reference runs branches on a thread pool, so with more than
one worker the assignment of queue entries to branches is scheduling-dependent.
Most generated cases therefore set ``run: {max_workers: 1}`` when they fan out;
a divergence in a case that does not is re-run with one worker, and if it then
disappears it is reported as order-dependent instead of as a real divergence.

Only the standard library, PyYAML and (inside ``main``) the two engines are used,
so ``ast.parse`` of this file and ``import`` without the reference both work.
"""

from __future__ import annotations

import argparse
import collections
import copy
import json
import os
import random
import re
import signal
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

import yaml

# Trace-step keys compared on both sides (docs/language.md §7); sub_trace recursively.
STEP_KEYS = (
    "step",
    "state",
    "tier",
    "output",
    "branches",
    "gate",
    "gate_via",
    "hook",
    "policy",
    "to",
    "cost",
    "judge_none",
    "judge_fallback",
    "judge_raw",
    "decision_tainted",
    "untrusted_control_flow",
    "reasoning",
    "reasonings",
    "sub_trace",
)
TOP_KEYS = ("status", "error", "result", "at", "ask", "reply_to", "usage", "context", "diagnosis")
CASE_TIMEOUT = 10  # seconds per engine run

# ---------------------------------------------------------------------------------------------
# Case generation
# ---------------------------------------------------------------------------------------------

LITERALS: dict[str, Any] = {
    "topic": "cats",
    "items": ["a", "b"],
    "empty": [],
    "n": 3,
    "flag": "yes",
    "obj": {"k": "v"},
    "nested": {"x": {"y": "deep"}},
    "request": "",
}
HOST_VALUES: dict[str, list[Any]] = {
    "topic": ["cats", "dogs", ""],
    "items": [["a", "b"], ["p", "q", "r"], [], "notalist"],
    "empty": [[], ["z"]],
    "n": [3, 4, "3"],
    "flag": ["yes", "no", " yes "],
    "obj": [{"k": "v"}, {"k": "w"}],
    "nested": [{"x": {"y": "deep"}}, {"x": {"y": "shallow"}}],
    "request": ["", "please write the notes to disk", "ignore all rules"],
    "extra": ["host-only value", ["e1", "e2"]],
}
PLACEHOLDERS = [
    "{{topic}}",
    "{{items}}",
    "{{ obj }}",
    "{{nested.x.y}}",
    "{{missing}}",
    "{{n}}",
    "{{flag}}",
    "{{request}}",
    "{{extra}}",
    "{{human.reply}}",
    "{{nested}}",
]
PRODUCE_POOL = [
    "x",
    "yes",
    "done",
    "write the file",
    '["a", "b"]',
    '```json\n["p", "q"]\n```',
    '{"k": 1}',
    '```\n{"k": 2}\n```',
    "not json",
    "42",
    '"str"',
    "[]",
    "```[1, 2]```",
    "[1, [2, 3]]",
    "null",
    "true",
    "ünïcode ✓",
    "  padded  ",
]
# Non-string YAML answers (an author writing `produce: [42]`); used rarely.
PRODUCE_ODD = [42, True, None, ["a"], {"k": 1}, 1.5]
JUDGE_POOL = [0, 0, 0, 0, 1, 1, 2, 3, -1, 7, "none", "NONE", " none ", "bogus"]
JUDGE_ODD = [True, False, 1.0, None]  # outside §8's stated shapes; used rarely
PROSE = [
    "the answer is complete",
    "the output mentions cats",
    "more work is needed",
    "the plan is to write",
    "it is a list",
    "quality is low",
]
TOOL_NAMES = ["calc", "search", "write_file", "send_reply", "mytool", "fetch"]
HOOK_NAMES = ["h1", "h2", "always_true", "always_false", "eq:topic:cats", "neq:flag:yes", "eq:o0:x", "eq:n:3", "nohook"]
TOOL_OUT_POOL = ["obs", '{"tool": "write_file", "written": true}', "42", "", "result: ok"]


def _pick(rng: random.Random, weighted: list[tuple[Any, float]]) -> Any:
    total = sum(w for _, w in weighted)
    r = rng.random() * total
    for value, w in weighted:
        r -= w
        if r <= 0:
            return value
    return weighted[-1][0]


class Gen:
    """Builds one random conformance case."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.tools_used: set[str] = set()
        self.hooks_used: set[str] = set()
        self.fanout = False
        self.prose_used = False

    # -- gates --------------------------------------------------------------------------------
    def gate(self, targets: list[str], last: bool) -> dict:
        rng = self.rng
        kind = _pick(rng, [("otherwise", 3 if last else 1), ("prose", 4), ("hook", 2)])
        g: dict[str, Any] = {}
        if kind == "otherwise":
            g["when"] = rng.choice(["otherwise", "otherwise", " Otherwise ", "OTHERWISE"])
            if rng.random() < 0.1:
                g["hook"] = rng.choice(HOOK_NAMES)
        elif kind == "prose":
            g["when"] = rng.choice(PROSE)
            self.prose_used = True
        else:
            g["when"] = "host check"
            g["hook"] = rng.choice(HOOK_NAMES)
            self.hooks_used.add(g["hook"])
        policy = _pick(rng, [("ok", 6), ("repair", 2), ("escalate", 1.5), ("fail", 0.7)])
        if policy == "ok":
            g["then"] = "ok"
        elif policy == "repair":
            g["repair"] = _pick(rng, [(1, 3), (2, 2), (0, 0.5)])
        elif policy == "escalate":
            g["escalate"] = True
            if rng.random() < 0.5:
                g["ask"] = rng.choice(["Approve {{topic}}?", "Proceed?"])
            if rng.random() < 0.4:
                g["reply_to"] = rng.choice(["approval.answer", "human.reply", "answer"])
        else:
            g["fail"] = True
        if policy != "fail":
            r = rng.random()
            if r < 0.02:
                pass  # no `to`
            elif r < 0.04:
                g["to"] = "ghost"
            else:
                g["to"] = rng.choice(targets + ["END"] * max(1, len(targets) // 2))
        return g

    def gates(self, targets: list[str]) -> list[dict]:
        n = _pick(self.rng, [(1, 3), (2, 4), (3, 3), (4, 1)])
        out = [self.gate(targets, i == n - 1) for i in range(n)]
        if self.rng.random() < 0.55 and not any(str(g["when"]).strip().lower() == "otherwise" for g in out):
            out.append({"when": "otherwise", "then": "ok", "to": self.rng.choice([*targets, "END", "END"])})
        return out

    # -- states -------------------------------------------------------------------------------
    def prompt(self, tag: str, outputs: list[str], fan: bool) -> str:
        rng = self.rng
        parts = [f"[{tag}]"]
        for _ in range(rng.randint(0, 2)):
            pool = PLACEHOLDERS + [f"{{{{{o}}}}}" for o in outputs]
            parts.append(rng.choice(pool))
        if fan:
            parts.append(rng.choice(["{{item}}", "#{{index}}", "{{item}} #{{index}}", ""]))
        return " ".join(p for p in parts if p)

    def input_map(self, outputs: list[str]) -> dict:
        rng = self.rng
        inp: dict[str, Any] = {}
        for key in rng.sample(["path", "content", "q", "topic", "items", "x"], rng.randint(0, 3)):
            inp[key] = rng.choice(
                [
                    "{{topic}}",
                    "{{ items }}",
                    "out.txt",
                    "about {{topic}}",
                    5,
                    True,
                    "{{missing}}",
                    "{{obj}}",
                    "{{item}}",
                    "{{index}}",
                    "{{request}}",
                ]
                + [f"{{{{{o}}}}}" for o in outputs]
                + [f"seen {{{{{o}}}}}" for o in outputs]
            )
        return inp

    def state(
        self,
        mname: str,
        sid: str,
        targets: list[str],
        outputs: list[str],
        callees: list[str],
        leaf_callees: list[str],
        self_call: bool,
    ) -> dict:
        rng = self.rng
        kinds = [("gen", 6), ("tool", 2)]
        if callees or self_call:
            kinds.append(("call", 2))
        kind = _pick(rng, kinds)
        st: dict[str, Any] = {}
        fan = rng.random() < 0.22
        if fan:
            self.fanout = True
            if rng.random() < 0.4:
                st["sample"] = rng.choice([2, 2, 3])
            else:
                st["over"] = _pick(
                    rng,
                    [
                        ("{{items}}", 5),
                        ("{{empty}}", 1.5),
                        ("{{missing}}", 0.5),
                        ("{{topic}}", 0.5),
                        ("items", 0.3),
                        ("{{nested.x}}", 0.3),
                        ("{{items}} and {{topic}}", 0.4),
                        ("{{extra}}", 0.5),
                    ]
                    + [(f"{{{{{o}}}}}", 1) for o in outputs],
                )
        if kind == "gen":
            if rng.random() < 0.9:
                st["structure"] = "s"
            st["prompt"] = self.prompt(f"{mname}.{sid}", outputs, fan)
            if rng.random() < 0.15:
                st["reason"] = True
            if rng.random() < 0.2:
                st["parse"] = rng.choice(["list", "json"])
            if rng.random() < 0.15:
                st["execution"] = "be brief"
        elif kind == "tool":
            name = rng.choice(TOOL_NAMES + ["undefined_tool"] * (1 if rng.random() < 0.15 else 0))
            st["tool"] = name
            self.tools_used.add(name)
            if rng.random() < 0.8:
                st["input"] = self.input_map(outputs)
        else:
            choices = leaf_callees or ["ghost_machine"] if fan else list(callees) + ([mname] if self_call else [])
            if rng.random() < 0.05:
                choices = ["ghost_machine"]
            st["call"] = rng.choice(choices or ["ghost_machine"])
            if rng.random() < 0.7:
                st["input"] = self.input_map(outputs)
            if rng.random() < 0.3:
                st["structure"] = "ignored on a call"
        if rng.random() < 0.15 and kind != "tool":
            st["tier"] = rng.choice(["fast", "balanced", "reasoning"])
        st["output"] = rng.choice(outputs[:1] * 1 + [f"o{sid[1:]}"] * 4 + ["items"] * (1 if rng.random() < 0.1 else 0))
        if rng.random() < 0.15:
            st["accumulate"] = True
        if rng.random() < 0.15:
            st["max_visits"] = rng.choice([1, 1, 2, 3])
        st["gates"] = self.gates(targets)
        return st

    def machine(self, name: str, n_states: int, callees: list[str], leaf_callees: list[str], self_call: bool) -> dict:
        rng = self.rng
        ids = [f"s{i}" for i in range(n_states)]
        outputs = [f"o{i}" for i in range(n_states)]
        m: dict[str, Any] = {"machine": name, "entry": "s0"}
        if rng.random() < 0.3:
            m["mklang"] = rng.choice(["0.3", "0.4"])
        m["budget"] = rng.randint(1, 4) if self_call else _pick(rng, [(rng.randint(1, 3), 1), (rng.randint(3, 12), 4)])
        if rng.random() < 0.15:
            m["default_tier"] = rng.choice(["fast", "reasoning"])
        if rng.random() < 0.2:
            m["result"] = rng.choice([*outputs, "topic", "nokey"])
        if rng.random() < 0.7:
            keys = rng.sample(sorted(LITERALS), rng.randint(1, 5))
            m["context"] = {k: copy.deepcopy(LITERALS[k]) for k in keys}
        m["states"] = {sid: self.state(name, sid, ids, outputs, callees, leaf_callees, self_call) for sid in ids}
        return m

    # -- oracles ------------------------------------------------------------------------------
    def produce(self, tags: list[str]) -> Any:
        rng = self.rng
        if rng.random() < 0.25:
            mp: dict[str, Any] = {}
            for tag in rng.sample(tags, max(1, len(tags) - (1 if rng.random() < 0.2 else 0))):
                if rng.random() < 0.3:
                    mp[f"[{tag}] #0"] = rng.choice(PRODUCE_POOL)
                mp[f"[{tag}]"] = rng.choice(PRODUCE_POOL)
            if rng.random() < 0.2:
                mp["Repair feedback"] = "repaired"
                mp = dict(reversed(list(mp.items())))
            return mp
        odd = rng.random() < 0.08
        return [
            rng.choice(PRODUCE_ODD if odd and rng.random() < 0.3 else PRODUCE_POOL) for _ in range(rng.randint(0, 9))
        ]

    def judge(self) -> Any:
        rng = self.rng
        r = rng.random()
        if r < 0.15:
            return None
        if r < 0.2:
            return "unparseable"
        if r < 0.22:
            return 1
        if r < 0.25:
            return []
        picks = [
            rng.choice(JUDGE_POOL if rng.random() < 0.3 else [0, 0, 1, 1, 2, "none"]) for _ in range(rng.randint(1, 7))
        ]
        if rng.random() < 0.03:
            picks[rng.randrange(len(picks))] = rng.choice(JUDGE_ODD)
        return picks

    def case(self, idx: int) -> dict:
        rng = self.rng
        n_reg = _pick(rng, [(0, 4), (1, 3), (2, 2)])
        reg_names = [f"m{i + 1}" for i in range(n_reg)]
        registry: dict[str, Any] = {}
        # m2 is a leaf (no calls); m1 may call m2 and itself; m0 (root) may call both and itself.
        for i in reversed(range(n_reg)):
            name = reg_names[i]
            callees = reg_names[i + 1 :]
            leaf = [c for c in callees if c == reg_names[-1]]
            self_call = rng.random() < 0.15 and i < n_reg - 1
            registry[name] = self.machine(name, rng.randint(1, 3), callees, leaf, self_call)
        root_self = rng.random() < 0.1
        leaf_callees = [reg_names[-1]] if reg_names else []
        root = self.machine("m0", rng.randint(1, 5), reg_names, leaf_callees, root_self)
        case: dict[str, Any] = {
            "case": f"diff-{idx:05d}",
            "description": "generated by benchmarks/differential.py",
            "machine": root,
        }
        if registry:
            case["registry"] = dict(reversed(list(registry.items())))
        tags = [f"{m['machine']}.{sid}" for m in [root, *registry.values()] for sid in m["states"]]
        llm: dict[str, Any] = {}
        if rng.random() < 0.95:
            llm["produce"] = self.produce(tags)
        j = self.judge()
        if j is not None:
            llm["judge"] = j
        if rng.random() < 0.35:
            llm["tokens"] = [rng.randint(0, 6), rng.randint(0, 6)]
        if llm:
            case["llm"] = llm
        tools: dict[str, Any] = {}
        for name in sorted(self.tools_used):
            if name == "undefined_tool" or rng.random() < 0.05:
                continue
            if rng.random() < 0.25:
                tools[name] = {
                    rng.choice(['"path"', "cats", "out.txt", "zzz", "5", "{"]): rng.choice(TOOL_OUT_POOL)
                    for _ in range(rng.randint(1, 2))
                }
            else:
                seq: list[Any] = [
                    rng.choice(TOOL_OUT_POOL) for _ in range(_pick(rng, [(0, 0.5), (1, 4), (2, 2), (3, 1)]))
                ]
                if seq and rng.random() < 0.1:
                    seq[0] = rng.choice([5, {"a": 1}, ["l"], None, True])
                tools[name] = seq
        if tools:
            case["tools"] = tools
        hooks: dict[str, Any] = {}
        for name in sorted(self.hooks_used):
            if name in ("h1", "h2") and rng.random() < 0.9:
                hooks[name] = [rng.random() < 0.5 for _ in range(_pick(rng, [(0, 0.5), (1, 3), (3, 3)]))]
            elif name == "always_true" and rng.random() < 0.1:
                hooks[name] = [False]  # a scripted hook shadows the built-in
        if hooks:
            case["hooks"] = hooks
        for key in ("input", "context"):
            if rng.random() < 0.35:
                keys = rng.sample(sorted(HOST_VALUES), rng.randint(1, 3))
                case[key] = {k: copy.deepcopy(rng.choice(HOST_VALUES[k])) for k in keys}
        run: dict[str, Any] = {}
        if rng.random() < 0.15:
            run["cost_budget"] = rng.randint(1, 25)
        if rng.random() < 0.2:
            run["suspendable"] = True
        if rng.random() < 0.25:
            run["escalate_suspend"] = True
        if rng.random() < 0.3:
            run["on_untrusted_flow"] = rng.choice(["halt", "report"])
        if rng.random() < 0.2:
            run["tool_effects"] = {rng.choice(TOOL_NAMES): rng.choice(["read", "effect"])}
        if rng.random() < 0.1:
            run["trusted_keys"] = rng.sample(sorted(HOST_VALUES), 2)
        if self.fanout and rng.random() < 0.85:
            run["max_workers"] = 1
        if run:
            case["run"] = run
        case["expect"] = {"status": "done"}
        return case


# ---------------------------------------------------------------------------------------------
# Running both engines
# ---------------------------------------------------------------------------------------------


class _Timeout(Exception):
    pass


def _on_alarm(_signum: int, _frame: Any) -> None:
    raise _Timeout()


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=repr, ensure_ascii=False))


def _with_timeout(fn: Any, *args: Any) -> Any:
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(CASE_TIMEOUT)
    try:
        return fn(*args)
    except _Timeout:
        return {"crash": "timeout"}
    except Exception as exc:
        tb = traceback.extract_tb(exc.__traceback__)
        where = f"{Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else "?"
        return {"crash": f"{type(exc).__name__}: {exc}"[:300], "crash_at": where}
    finally:
        signal.alarm(0)


_NONCE = re.compile(r"(</?data-)[0-9a-f]{12}>")


def _denonce(value: Any) -> Any:
    """Fence nonces are random per LLM call (they can reach an error text): compare them as NONCE."""
    if isinstance(value, str):
        return _NONCE.sub(r"\1NONCE>", value)
    if isinstance(value, list):
        return [_denonce(v) for v in value]
    if isinstance(value, dict):
        return {k: _denonce(v) for k, v in value.items()}
    return value


def _result_dict(res: Any) -> dict:
    out = {key: getattr(res, key, None) for key in TOP_KEYS}
    out["trace"] = getattr(res, "trace", [])
    out["_extra_top"] = sorted(k for k, v in vars(res).items() if k not in TOP_KEYS and k != "trace" and v)
    return _denonce(_jsonable(out))


def run_ref(case: dict) -> dict:
    from mklang.scripttest import build_registry
    from mklang.scripttest import run_scenario as ref_run_scenario

    def go() -> dict:
        c = copy.deepcopy(case)
        machine, registry = build_registry(c)
        return _result_dict(ref_run_scenario(machine, registry, c))

    return _with_timeout(go)


def run_ours(case: dict, text: str) -> dict:
    from mkl_notebook.testing import load_cases, run_scenario

    def go() -> dict:
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False, encoding="utf-8") as fh:
            fh.write(text)
            path = fh.name
        try:
            (scenario,) = load_cases([path])
        finally:
            os.unlink(path)
        outcome = run_scenario(scenario)
        if outcome.result is None:
            return {"crash": f"runner refused: {outcome.why}"}
        return _result_dict(outcome.result)

    return _with_timeout(go)


# ---------------------------------------------------------------------------------------------
# Comparison
# ---------------------------------------------------------------------------------------------


def _err_head(err: Any) -> str:
    if not isinstance(err, str):
        return repr(err)
    head = err.split(":")[0]
    if head == "state-error":
        rest = err[len("state-error:") :].strip().strip("\"'")
        return "state-error: " + " ".join(rest.split()[:2])
    if head == "call-failed":
        return "call-failed: " + _err_head(err[len("call-failed:") :].strip())
    return head


def compare_steps(a: list, b: list, path: str, diffs: list, extras: dict) -> None:
    if not isinstance(a, list) or not isinstance(b, list):
        if a != b:
            diffs.append((f"{path}", a, b))
        return
    if len(a) != len(b):
        diffs.append(
            (
                f"{path}.length",
                [s.get("state") if isinstance(s, dict) else s for s in a],
                [s.get("state") if isinstance(s, dict) else s for s in b],
            )
        )
    for i, (sa, sb) in enumerate(zip(a, b, strict=False)):
        if isinstance(sa, list) or isinstance(sb, list):  # fan-out sub_trace: a list of traces
            compare_steps(
                sa if isinstance(sa, list) else [], sb if isinstance(sb, list) else [], f"{path}[{i}]", diffs, extras
            )
            continue
        for key in set(sa) - set(STEP_KEYS):
            extras["ref"][key] += 1
        for key in set(sb) - set(STEP_KEYS):
            extras["ours"][key] += 1
        for key in STEP_KEYS:
            va, vb = sa.get(key), sb.get(key)
            if key == "sub_trace":
                if va is None and vb is None:
                    continue
                if va is None or vb is None:
                    diffs.append(
                        (
                            f"{path}[].sub_trace@{sa.get('policy')}{' (ref only)' if vb is None else ' (ours only)'}",
                            va,
                            vb,
                        )
                    )
                    continue
                nested = (va and isinstance(va[0], list)) or (vb and isinstance(vb[0], list))
                compare_steps(va, vb, f"{path}[].sub_trace" + ("[]" if nested else ""), diffs, extras)
            elif va != vb:
                where = f"@{sa.get('policy')}" if sa.get("policy") == sb.get("policy") else ""
                side = " (ref only)" if vb is None else " (ours only)" if va is None else ""
                diffs.append((f"{path}[].{key}{where}{side}", va, vb))
                if key == "state":
                    return  # the rest of the step is not comparable


_PY_TO_JSON = {
    "dict": "object",
    "list": "array",
    "str": "string",
    "int": "number",
    "float": "number",
    "bool": "boolean",
    "NoneType": "null",
}
_WORDING = [
    # KeyError's str() quotes the whole message in the reference: state-error: "tool: unknown tool 'x' …"
    (re.compile(r'(state-error: |\[branch-error: )"(.*?)"(\]|$)'), r"\1\2\3"),
    (re.compile(r" \(register it [^)]*\)+"), ""),
    (
        re.compile(r"(no scripted output for input) .*", re.S),
        lambda m: m.group(1) + " …" + ("]" if m.group(0).endswith("]") else ""),
    ),
    (re.compile(r"\(got (dict|list|str|int|float|bool|NoneType)\)"), lambda m: f"(got {_PY_TO_JSON[m.group(1)]})"),
]


def normalise_wording(value: Any) -> Any:
    """Canonicalise error texts whose wording docs/language.md leaves open ("…")."""
    if isinstance(value, str):
        for pat, rep in _WORDING:
            value = pat.sub(rep, value)
        return value
    if isinstance(value, list):
        return [normalise_wording(v) for v in value]
    if isinstance(value, dict):
        return {k: normalise_wording(v) for k, v in value.items()}
    return value


def compare(ref: dict, ours: dict, extras: dict) -> list[tuple[str, Any, Any]]:
    if "crash" in ref or "crash" in ours:
        if "crash" in ref and "crash" in ours:
            return []
        return [("crash", ref.get("crash", ref.get("status")), ours.get("crash", ours.get("status")))]
    diffs: list[tuple[str, Any, Any]] = []
    for key in TOP_KEYS:
        if ref.get(key) != ours.get(key):
            diffs.append((key, ref.get(key), ours.get(key)))
    for key in ref.get("_extra_top", []):
        extras["ref_top"][key] += 1
    for key in ours.get("_extra_top", []):
        extras["ours_top"][key] += 1
    compare_steps(ref["trace"], ours["trace"], "trace", diffs, extras)
    return diffs


def _missing_state_case(ref: dict, ours: dict) -> bool:
    """docs/language.md §2: a transition to a missing state halts here; the reference crashes (KeyError:
    a crash, a bare "state-error: 'x'" through a call, or "[branch-error: 'x']" in a fan-out) or, when a
    guard fires first at the next loop top, reports that guard instead."""
    return (
        "unknown state '" in json.dumps(ours)
        or str(ref.get("crash", "")).startswith("KeyError")
        or "state-error: '" in json.dumps(ref)
        or "[branch-error: '" in json.dumps(ref)
    )


def _nested_suspension(case: dict | None, ref: dict, ours: dict) -> bool:
    """Both suspended while the root run was executing a call state (the suspension came up from a sub-run)."""
    if not case or ref.get("status") != "suspended" or ours.get("status") != "suspended":
        return False
    root = case["machine"]
    trace = ref.get("trace") or []
    current = trace[-1].get("to") if trace else root.get("entry")
    return "call" in (root.get("states", {}).get(current) or {}) and "tool" not in root["states"][current]


def _odd_script(case: dict | None) -> str:
    """Scripted answers outside docs/language.md §8's stated shapes: non-string produce answers, and judge entries
    that are neither a whole number nor a string (bool, null, float)."""
    llm = (case or {}).get("llm") or {}
    produce = llm.get("produce")
    values = produce if isinstance(produce, list) else list(produce.values()) if isinstance(produce, dict) else []
    odd = []
    if any(not isinstance(v, str) for v in values):
        odd.append("non-string produce answer")
    judge = llm.get("judge")
    if isinstance(judge, list) and any(isinstance(j, bool) or not isinstance(j, (int, str)) for j in judge):
        odd.append("bool/null/float judge entry")
    return " + ".join(odd)


def signature(ref: dict, ours: dict, diffs: list, case: dict | None = None) -> str:
    odd = _odd_script(case)
    if odd:
        return f"ODD-SCRIPT: {odd} in the case (other divergences in such cases are not told apart)"
    if _missing_state_case(ref, ours):
        return "DELIBERATE: transition to a missing state (docs/language.md §2: we halt cleanly, the reference crashes)"
    if _nested_suspension(case, ref, ours) and {"context", "trace.length", "usage"} & {d[0] for d in diffs}:
        return "NESTED SUSPENSION: the suspended result's trace/context/usage (root run vs innermost run)"
    if diffs and diffs[0][0] == "crash":
        if "crash" in ref:
            return f"ref-crash: {ref['crash'].split(':')[0]} at {ref.get('crash_at')}"
        return f"ours-crash: {ours['crash'][:60]}"
    fields = sorted({d[0] for d in diffs})
    sig = ",".join(fields)
    if any(f == "error" for f in fields) or any(f == "status" for f in fields):
        sig += (
            f" | ref={ref.get('status')}/{_err_head(ref.get('error'))} ours={ours.get('status')}/"
            f"{_err_head(ours.get('error'))}"
        )
    return sig


# ---------------------------------------------------------------------------------------------
# Minimisation (greedy: drop pieces while the divergence signature holds)
# ---------------------------------------------------------------------------------------------


def _candidates(case: dict):
    def machines(c):
        yield c["machine"]
        yield from (c.get("registry") or {}).values()

    for key in ("registry", "input", "context", "tools", "hooks", "run", "llm"):
        if key in case:
            c = copy.deepcopy(case)
            del c[key]
            yield c
    for sect in ("registry", "input", "context", "tools", "hooks", "run", "llm"):
        for k in list(case.get(sect) or {}):
            c = copy.deepcopy(case)
            del c[sect][k]
            yield c
    llm = case.get("llm") or {}
    for k in ("produce", "judge"):
        v = llm.get(k)
        if isinstance(v, list):
            for i in range(len(v)):
                c = copy.deepcopy(case)
                del c["llm"][k][i]
                yield c
        elif isinstance(v, dict):
            for kk in list(v):
                c = copy.deepcopy(case)
                del c["llm"][k][kk]
                yield c
    for name, v in (case.get("tools") or {}).items():
        if isinstance(v, list):
            for i in range(len(v)):
                c = copy.deepcopy(case)
                del c["tools"][name][i]
                yield c
    for name, v in (case.get("hooks") or {}).items():
        for i in range(len(v or [])):
            c = copy.deepcopy(case)
            del c["hooks"][name][i]
            yield c
    for mi, m in enumerate(list(machines(case))):

        def mach(c, mi=mi):
            return list(machines(c))[mi]

        for k in ("context", "result", "mklang", "default_tier"):
            if k in m:
                c = copy.deepcopy(case)
                del mach(c)[k]
                yield c
        for sid in list(m["states"]):
            if sid != m["entry"]:
                c = copy.deepcopy(case)
                del mach(c)["states"][sid]
                yield c
        for sid, st in m["states"].items():
            for i in range(len(st.get("gates") or [])):
                if len(st["gates"]) > 1:
                    c = copy.deepcopy(case)
                    del mach(c)["states"][sid]["gates"][i]
                    yield c
                for gk in ("hook", "ask", "reply_to"):
                    if gk in st["gates"][i]:
                        c = copy.deepcopy(case)
                        del mach(c)["states"][sid]["gates"][i][gk]
                        yield c
            for k in (
                "reason",
                "execution",
                "tier",
                "accumulate",
                "max_visits",
                "parse",
                "structure",
                "input",
                "sample",
                "over",
            ):
                if k in st:
                    c = copy.deepcopy(case)
                    del mach(c)["states"][sid][k]
                    yield c
            for k in list(st.get("input") or {}):
                c = copy.deepcopy(case)
                del mach(c)["states"][sid]["input"][k]
                yield c
            if "prompt" in st and st["prompt"].count("{{"):
                c = copy.deepcopy(case)
                mach(c)["states"][sid]["prompt"] = st["prompt"].split(" ")[0]
                yield c


def minimise(case: dict, sig: str, check) -> dict:
    best = case
    improved = True
    while improved:
        improved = False
        for cand in _candidates(best):
            try:
                if check(cand) == sig:
                    best = cand
                    improved = True
                    break
            except Exception:
                continue
    return best


# ---------------------------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------------------------


def _dump(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=None, width=110)


def _skeleton(trace: list) -> list:
    keys = ("state", "gate_via", "policy", "to")
    return [{k: s.get(k) for k in keys if k in s} for s in trace if isinstance(s, dict)]


def case_text(case: dict, ref: dict, ours: dict, diffs: list, sig: str) -> str:
    c = copy.deepcopy(case)
    if "crash" not in ref:
        exp: dict[str, Any] = {"status": ref["status"]}
        for key in ("error", "at", "ask", "reply_to"):
            if ref.get(key) is not None:
                exp[key] = ref[key]
        if ref["status"] == "done":
            exp["result"] = ref["result"]
        exp["trace"] = _skeleton(ref["trace"])
        c["expect"] = exp
        c["description"] = "differential: expect = the reference (mklang 1.4.0) outcome"
    lines = [_dump(c), f"# divergence group: {sig}", "# differences (path, reference, ours):"]
    for path, a, b in diffs:
        lines.append(
            f"#   {path}: ref={json.dumps(a, ensure_ascii=False)[:300]} ours={json.dumps(b, ensure_ascii=False)[:300]}"
        )
    for name, res in (("reference", ref), ("ours", ours)):
        lines.append(f"# ---- {name} result ----")
        for line in json.dumps(res, indent=1, ensure_ascii=False).splitlines():
            lines.append("# " + line)
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--out", default="/tmp/divergences")
    ap.add_argument("--minimize", action="store_true", help="shrink one case per divergence group")
    ap.add_argument("--cases", nargs="*", help="run these case files instead of generating")
    ap.add_argument(
        "--strict-wording",
        action="store_true",
        help="group error-wording differences (quotes, '(register it …)', Python vs JSON type names) "
        "like any other divergence instead of as WORDING-ONLY",
    )
    ap.add_argument("--max-examples", type=int, default=3, help="example case numbers shown per group")
    args = ap.parse_args(argv)

    import mklang  # noqa: F401 - fail early with a clear message when run outside the reference venv

    import mkl_notebook  # noqa: F401

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.yaml"):
        old.unlink()

    if args.cases:
        cases = [yaml.safe_load(Path(p).read_text(encoding="utf-8")) for p in args.cases]
        for c in cases:
            c["expect"] = {"status": "done"}
    else:
        cases = [Gen(random.Random(f"{args.seed}-{i}")).case(i) for i in range(args.count)]

    extras = {
        "ref": collections.Counter(),
        "ours": collections.Counter(),
        "ref_top": collections.Counter(),
        "ours_top": collections.Counter(),
    }
    groups: dict[str, list[int]] = collections.defaultdict(list)
    order_dependent: list[int] = []
    kinds: dict[str, list[int]] = collections.defaultdict(list)
    first: dict[str, tuple[dict, dict, dict, list]] = {}
    statuses: collections.Counter = collections.Counter()
    written = 0

    def outcome(case: dict) -> tuple[dict, dict, list]:
        """Both results and their differences; wording-only differences are flagged by the signature."""
        text = _dump(case)
        c = yaml.safe_load(text)
        ref = run_ref(c)
        ours = run_ours(c, text)
        return ref, ours, compare(ref, ours, extras)

    def classify(ref: dict, ours: dict, diffs: list, case: dict) -> tuple[str, list]:
        """(group signature, the differences that define it); ("", []) when there is none."""
        if not diffs:
            return "", []
        if _odd_script(case):
            return signature(ref, ours, diffs, case), diffs
        if args.strict_wording:
            return signature(ref, ours, diffs, case), diffs
        scratch = {k: collections.Counter() for k in extras}
        nref, nours = normalise_wording(ref), normalise_wording(ours)
        ndiffs = compare(nref, nours, scratch)
        if not ndiffs:
            return "WORDING-ONLY: " + signature(ref, ours, diffs, case), diffs
        return signature(nref, nours, ndiffs, case), ndiffs

    def sig_of(ref: dict, ours: dict, diffs: list, case: dict) -> str:
        return classify(ref, ours, diffs, case)[0]

    for idx, case in enumerate(cases):
        ref, ours, diffs = outcome(case)
        statuses[ref.get("status", "crash") + "/" + _err_head(ref.get("error", ref.get("crash")))] += 1
        if not diffs:
            continue
        sig, shown = classify(ref, ours, diffs, case)
        run_opts = case.get("run") or {}
        fanned = any("branches" in s for s in ref.get("trace", []) + ours.get("trace", []) if isinstance(s, dict))
        if run_opts.get("max_workers") != 1 and (fanned or "crash" in ref):
            serial = copy.deepcopy(case)
            serial.setdefault("run", {})["max_workers"] = 1
            if not sig_of(*outcome(serial), serial):
                order_dependent.append(idx)
                sig = "ORDER-DEPENDENT (fan-out on a thread pool, disappears with max_workers: 1)"
        groups[sig].append(idx)
        first.setdefault(sig, (case, ref, ours, shown))
        if not sig.startswith(("WORDING", "ORDER", "DELIBERATE", "NESTED", "ODD")):
            for path in {d[0] for d in shown}:
                kinds[path].append(idx)
        (out / f"{idx:05d}.yaml").write_text(case_text(case, ref, ours, diffs, sig), encoding="utf-8")
        written += 1

    print(f"ran {len(cases)} cases (seed {args.seed}); {written} diverged, in {len(groups)} groups; written to {out}/")
    print("\nreference outcomes:")
    for key, n in statuses.most_common():
        print(f"  {n:5d}  {key}")
    print("\ndivergence groups (most frequent first):")
    explained = ("WORDING", "ORDER", "DELIBERATE", "NESTED", "ODD")
    ranked = sorted(groups.items(), key=lambda kv: (kv[0].startswith(explained), -len(kv[1])))
    for gi, (sig, idxs) in enumerate(ranked):
        case, ref, ours, diffs = first[sig]
        print(f"\n[{gi}] {len(idxs)} case(s): {sig}")
        print(f"     e.g. {', '.join(f'{i:05d}.yaml' for i in idxs[: args.max_examples])}")
        for path, a, b in diffs[:4]:
            print(f"     {path}: ref={json.dumps(a, ensure_ascii=False)[:140]}")
            print(f"     {' ' * len(path)}  ours={json.dumps(b, ensure_ascii=False)[:140]}")
        if args.minimize and not sig.startswith(("ORDER-DEPENDENT", "WORDING", "DELIBERATE")):

            def check(cand: dict) -> str:
                return sig_of(*outcome(cand), cand)

            small = minimise(case, sig, check)
            r, o, d = outcome(small)
            path = out / f"min-{gi:02d}.yaml"
            path.write_text(case_text(small, r, o, d, sig), encoding="utf-8")
            print(f"     minimised: {path}")
    print("\nper difference (a case can show several; wording-only and order-dependent cases excluded):")
    for path, idxs in sorted(kinds.items(), key=lambda kv: -len(kv[1])):
        print(f"  {len(idxs):5d}  {path}   e.g. {', '.join(f'{i:05d}' for i in idxs[: args.max_examples])}")
    print("\nstep keys outside the compared set (implementation extras, ignored):")
    for side in ("ref", "ours"):
        print(f"  {side}: {dict(extras[side]) or '-'}")
    only_ref = sorted(set(extras["ref"]) - set(extras["ours"]))
    only_ours = sorted(set(extras["ours"]) - set(extras["ref"]))
    print(f"  emitted only by the reference: {only_ref or '-'}; only by ours: {only_ours or '-'}")
    print(
        f"RunResult attributes outside the compared set: ref {dict(extras['ref_top'])}, ours {dict(extras['ours_top'])}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
