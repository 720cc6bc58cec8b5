"""Calls made on a real Dask ``LocalCluster`` of process workers: the same runs and journals as on threads.

The run loop and its journal stay in the test's process; only the calls (host tools, scripted model
calls' waits) go to the workers. A worker killed in the middle of a call loses nothing, and a
non-idempotent tool is never called twice: its run stops in doubt instead.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dask
import pytest

from mkl_notebook.app import batch, oracles
from mkl_notebook.durable import runs as durable
from mkl_notebook.durable.stores import SQLiteStore
from mkl_notebook.engine.oracle import Oracle, OracleRequest, ProduceAnswer, ProduceRequest
from mkl_notebook.executors.dask import DaskExecutor
from mkl_notebook.executors.dask_calls import DaskCalls
from mkl_notebook.lang.loader import load
from mkl_notebook.providers.host import Registry

from support import chain_source, env_without_models, mkl_cli

distributed = pytest.importorskip("distributed")  # the [dask] extra; CI installs it with [test]

FAN = """\
machine: fan
entry: each
budget: 20
context:
  items: [a, b, c, d, e, f]
states:
  each:
    over: "{{items}}"
    tool: work
    input: { item: "{{item}}" }
    output: done
    gates:
      - { when: otherwise, then: ok, to: END }
"""

CHARGE = """\
machine: charge
entry: pay
budget: 3
states:
  pay:
    tool: pay
    input: { who: "{{who}}" }
    output: receipt
    idempotent: false
    gates:
      - { when: otherwise, then: ok, to: END }
context:
  who: ""
"""

SAMPLED = """\
machine: sampled
entry: ideas
budget: 10
states:
  ideas:
    sample: 6
    structure: One idea.
    prompt: "An idea, please."
    output: ideas
    gates:
      - { when: otherwise, then: ok, to: END }
"""


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=4, processes=True, dashboard_address=":0", silence_logs=40
    )
    with distributed.Client(cluster) as dask_client:
        yield dask_client
    cluster.close()


@pytest.fixture(scope="module")
def calls(client: Any) -> Iterator[DaskCalls]:
    """The streams to the cluster's workers, shared by the runs of a test as by those of a command."""
    servers = DaskCalls(client)
    yield servers
    servers.close()


def work(folder: str, item: str) -> str:
    """A host tool that notes which process ran it."""
    with open(os.path.join(folder, f"pid-{item}"), "w", encoding="utf-8") as note:
        note.write(str(os.getpid()))
    return f"worked on {item}"


def work_dying_once(folder: str, item: str) -> str:
    """The first call for item 'c' kills the worker it runs on, in the middle of the call."""
    flag = os.path.join(folder, "killed")
    with open(os.path.join(folder, "calls"), "a", encoding="utf-8") as calls:
        calls.write(item + "\n")
    if item == "c" and not os.path.exists(flag):
        open(flag, "w").close()
        os._exit(1)
    return f"worked on {item}"


def pay_dying_once(folder: str, who: str) -> str:
    """A payment (an effect) that is made, and then its worker dies before it can say so."""
    with open(os.path.join(folder, "payments"), "a", encoding="utf-8") as payments:
        payments.write(who + "\n")
    if not os.path.exists(os.path.join(folder, "killed")):
        open(os.path.join(folder, "killed"), "w").close()
        os._exit(1)
    return f"paid {who}"


def _registry(name: str, function: Any, folder: Path) -> Registry:
    registry = Registry()
    registry.tool(functools.partial(function, str(folder)), name=name, effect="read")  # type: ignore[call-overload]
    return registry


def _answers(store: SQLiteStore, run_id: str) -> list[tuple[Any, ...]]:
    """The answers a journal holds: position, request fingerprint, answer (branches finish in any order)."""
    return sorted(
        (record["pos"], record["fp"], json.dumps(record.get("answer"), sort_keys=True))
        for record in store.read(run_id)
        if record["t"] == "answer"
    )


def _oracle(registry: Registry, calls: DaskCalls | None = None, limit: int | None = None) -> Oracle:
    executor = (lambda oracle: DaskExecutor(oracle, calls, limit)) if calls is not None else None
    return oracles.choose(script={"llm": {}}, registry=registry, executor=executor)


def test_a_fan_out_on_dask_gives_the_results_and_journal_of_threads(calls: DaskCalls, tmp_path: Path) -> None:
    machine = load(FAN)
    here, there = tmp_path / "threads", tmp_path / "dask"
    here.mkdir(), there.mkdir()
    on_threads = durable.start(
        machine, _oracle(_registry("work", work, here)), store=SQLiteStore(here / "s.sqlite"), run_id="fan"
    )
    on_dask = durable.start(
        machine, _oracle(_registry("work", work, there), calls), store=SQLiteStore(there / "s.sqlite"), run_id="fan"
    )
    assert on_dask.result.status == on_threads.result.status == "done"
    assert on_dask.result.context["done"] == on_threads.result.context["done"] == [f"worked on {x}" for x in "abcdef"]
    assert _answers(SQLiteStore(there / "s.sqlite"), "fan") == _answers(SQLiteStore(here / "s.sqlite"), "fan")
    pids = {(there / f"pid-{x}").read_text() for x in "abcdef"}
    assert str(os.getpid()) not in pids  # every call ran in a worker process
    assert {(here / f"pid-{x}").read_text() for x in "abcdef"} == {str(os.getpid())}


def test_a_batch_on_dask_gives_the_results_and_journals_of_threads(calls: DaskCalls, tmp_path: Path) -> None:
    machine = load(FAN.replace("items: [a, b, c, d, e, f]", "items: []"))
    rows = [{"items": [f"{n}-{k}" for k in range(3)]} for n in range(4)]
    outcomes = {}
    for name, servers in (("threads", None), ("dask", calls)):
        folder = tmp_path / name
        folder.mkdir()
        registry = _registry("work", work, folder)
        store = SQLiteStore(folder / "s.sqlite")
        planned = batch.plan_rows(rows, "b")
        done = [
            row
            for row in batch.run_rows(
                batch.RowStart(machine, store, lambda r=registry, c=servers: _oracle(r, c)), planned
            )
            if row
        ]
        outcomes[name] = (
            sorted((row.run_id, row.outcome.result.context["done"]) for row in done if row.outcome),
            store,
        )
    assert outcomes["dask"][0] == outcomes["threads"][0]
    for run_id, _ in outcomes["dask"][0]:
        assert _answers(outcomes["dask"][1], run_id) == _answers(outcomes["threads"][1], run_id)


def test_a_worker_killed_mid_batch_loses_nothing_and_the_journal_keeps_one_answer(
    calls: DaskCalls, tmp_path: Path
) -> None:
    machine = load(FAN)
    store = SQLiteStore(tmp_path / "s.sqlite")
    outcome = durable.start(
        machine, _oracle(_registry("work", work_dying_once, tmp_path), calls), store=store, run_id="killed"
    )
    assert (tmp_path / "killed").exists()  # a worker did die in the middle of item c's call
    assert outcome.result.status == "done"
    assert outcome.result.context["done"] == [f"worked on {x}" for x in "abcdef"]
    calls = (tmp_path / "calls").read_text().split()
    assert calls.count("c") == 2 and sorted(set(calls)) == list("abcdef")  # c was made again (it may be)
    positions = [answer[0] for answer in _answers(store, "killed")]
    assert len(positions) == len(set(positions)) == 6  # and journaled once


def test_a_worker_killed_in_the_middle_of_a_batch_loses_no_row(calls: DaskCalls, tmp_path: Path) -> None:
    machine = load(FAN.replace("items: [a, b, c, d, e, f]", "items: []"))
    store = SQLiteStore(tmp_path / "s.sqlite")
    registry = _registry("work", work_dying_once, tmp_path)
    rows = batch.plan_rows([{"items": [letter]} for letter in "abcdef"], "rows")
    done = [
        row for row in batch.run_rows(batch.RowStart(machine, store, lambda: _oracle(registry, calls)), rows) if row
    ]
    assert (tmp_path / "killed").exists()
    assert sorted(row.outcome.result.context["done"][0] for row in done if row.outcome) == [
        f"worked on {x}" for x in "abcdef"
    ]
    for row in rows:  # each row's one call journaled once, the killed one included
        assert len(_answers(store, row.run_id)) == 1


def test_a_non_idempotent_tool_on_a_lost_worker_is_in_doubt_and_never_called_twice(
    calls: DaskCalls, tmp_path: Path
) -> None:
    machine = load(CHARGE)
    store = SQLiteStore(tmp_path / "s.sqlite")
    registry = _registry("pay", pay_dying_once, tmp_path)
    outcome = durable.start(machine, _oracle(registry, calls), store=store, run_id="pay", input={"who": "ada"})
    assert outcome.result.status == "in_doubt"
    assert outcome.in_doubt is not None and outcome.in_doubt.tool == "pay"
    assert (tmp_path / "payments").read_text().split() == ["ada"]  # paid once, not twice
    settled = durable.resume_journal(
        store, "pay", _oracle(registry, calls), resolution=durable.Resolution("completed", "paid ada")
    )
    assert settled.result.status == "done" and settled.result.context["receipt"] == "paid ada"
    assert (tmp_path / "payments").read_text().split() == ["ada"]


def test_a_tool_that_cannot_travel_to_the_workers_fails_alone_with_a_message_saying_so(
    calls: DaskCalls, tmp_path: Path
) -> None:
    machine = load(FAN)
    registry = _registry("work", work, tmp_path)
    guard = threading.Lock()

    def guarded(item: str) -> str:  # holds a lock: it cannot be pickled, so it cannot leave this process
        with guard:
            return item

    registry.tool(guarded, name="guarded", effect="read")
    outcome = durable.start(
        load(FAN.replace("tool: work", "tool: guarded")),
        _oracle(registry, calls),
        store=SQLiteStore(tmp_path / "s.sqlite"),
        run_id="guarded",
    )
    assert outcome.result.status == "done"  # each branch failed as its own tool error, none in doubt
    assert all("cannot be sent to the Dask cluster's workers" in done for done in outcome.result.context["done"])
    fine = durable.start(machine, _oracle(registry, calls), store=SQLiteStore(tmp_path / "t.sqlite"), run_id="fine")
    assert fine.result.context["done"] == [f"worked on {x}" for x in "abcdef"]  # the servers still serve


def _unreadable_here() -> Any:
    raise ImportError("no module named 'only_on_workers'")


class _OnlyOnWorkers:
    """A value a worker can send, which this process cannot read back (as if its class lived only there)."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (_unreadable_here, ())


def work_answering_unreadably(folder: str, item: str) -> Any:
    return _OnlyOnWorkers() if item == "c" else f"worked on {item}"


def test_an_answer_this_process_cannot_read_fails_that_call_alone(calls: DaskCalls, tmp_path: Path) -> None:
    outcome = durable.start(
        load(FAN),
        _oracle(_registry("work", work_answering_unreadably, tmp_path), calls),
        store=SQLiteStore(tmp_path / "s.sqlite"),
        run_id="unreadable",
    )
    assert outcome.result.status == "done"  # the other branches were answered, none waits forever
    done = outcome.result.context["done"]
    assert "the answer from the Dask worker cannot be read here" in done[2] and "only_on_workers" in done[2]
    assert [text for index, text in enumerate(done) if index != 2] == [f"worked on {x}" for x in "abdef"]


class _Recorded(Oracle):
    """Produce calls that take 0.3 s on a worker and note when they ran there."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def ask(self, request: OracleRequest) -> Any:
        raise AssertionError("every call is made on the cluster")

    def remote_call(self, request: OracleRequest) -> Any:
        assert isinstance(request, ProduceRequest)
        return functools.partial(_spanned, str(self.folder), request.position)


def _spanned(folder: str, position: str) -> ProduceAnswer:
    start = time.time()
    time.sleep(0.3)
    with open(os.path.join(folder, "spans"), "a", encoding="utf-8") as spans:
        spans.write(f"{start} {time.time()}\n")
    return ProduceAnswer(f"idea at {position}")


def _most_at_once(path: Path) -> int:
    events = []
    for line in path.read_text().split("\n"):
        if line:
            start, end = map(float, line.split())
            events += [(start, 1), (end, -1)]
    running = most = 0
    for _, change in sorted(events):
        running += change
        most = max(most, running)
    return most


@pytest.mark.parametrize("limit", [2, None])
def test_the_semaphore_holds_concurrent_model_calls_at_n(calls: DaskCalls, tmp_path: Path, limit: int | None) -> None:
    oracle = DaskExecutor(_Recorded(tmp_path), calls, limit)
    outcome = durable.start(load(SAMPLED), oracle, store=SQLiteStore(tmp_path / "s.sqlite"), run_id="s")
    assert outcome.result.status == "done" and len(outcome.result.context["ideas"]) == 6
    most = _most_at_once(tmp_path / "spans")
    if limit is None:
        assert most > 2  # without the cap the cluster runs more at once (so the capped case can fail)
    else:
        assert most == limit


@pytest.fixture
def workerless() -> Iterator[DaskCalls]:
    """The streams to a cluster that has no worker, and waits half a second for one."""
    with dask.config.set({"distributed.scheduler.no-workers-timeout": "0.5s"}):
        cluster = distributed.LocalCluster(n_workers=0, processes=False, dashboard_address=":0", silence_logs=40)
        client = distributed.Client(cluster, set_as_default=False)
        servers = DaskCalls(client)
    yield servers
    servers.close()
    client.close()
    cluster.close()


def pay_noted(folder: str, who: str) -> str:
    with open(os.path.join(folder, "payments"), "a", encoding="utf-8") as payments:
        payments.write(who + "\n")
    return f"paid {who}"


def test_calls_on_a_cluster_left_without_workers_fail_unmade_and_running_again_makes_them(
    workerless: DaskCalls, calls: DaskCalls, tmp_path: Path
) -> None:
    store = SQLiteStore(tmp_path / "s.sqlite")
    chain = load(chain_source(1))
    idea = durable.start(chain, DaskExecutor(_Recorded(tmp_path), workerless), store=store, run_id="idea")
    assert idea.result.status == "halt" and "no Dask worker has been reachable for 0.5s" in (idea.result.error or "")
    registry = _registry("pay", pay_noted, tmp_path)
    paid = durable.start(load(CHARGE), _oracle(registry, workerless), store=store, run_id="pay", input={"who": "ada"})
    assert paid.result.status == "halt" and "the call was not sent" in (paid.result.error or "")
    assert not (tmp_path / "payments").exists()
    assert _answers(store, "idea") == _answers(store, "pay") == []  # no answer, and no failure, journaled

    idea = durable.start(chain, DaskExecutor(_Recorded(tmp_path), calls), store=store, run_id="idea")
    assert idea.result.status == "done" and idea.calls["made"] == 1  # the model call is made now
    paid = durable.start(load(CHARGE), _oracle(registry, calls), store=store, run_id="pay", input={"who": "ada"})
    assert paid.result.status == "done"  # not in doubt: the payment never left this process before
    assert (tmp_path / "payments").read_text().split() == ["ada"]


GREETER = """\
machine: greeter_on_dask
entry: greet
budget: 3
result: line
context:
  name: ""
states:
  greet:
    tool: whereabouts
    input: { name: "{{name}}" }
    output: line
    gates:
      - { when: otherwise, then: ok, to: END }
"""


def whereabouts(name: str) -> str:
    return f"{name} from {os.getpid()}"


def test_map_in_a_notebook_on_the_kernels_dask_client(client: Any, ip: Any) -> None:
    import mkl_notebook

    mkl_notebook.tool(whereabouts, effect="read")
    ip.define(GREETER)
    ip.shell.user_ns["people"] = [{"name": "ada"}, {"name": "bo"}, {"name": "cy"}]
    script = ip.script("none.yaml", {"llm": {}})
    ip.run(f"b = %mkl map greeter_on_dask --over $people --executor dask --script {script}")
    b = ip.shell.user_ns["b"]
    assert b.counts == {"done": 3}
    where = {line.split(" from ")[1] for line in b.results}
    assert str(os.getpid()) not in where  # the tool ran on the cluster's workers
    ip.run("%mkl config executor=dask max_model_calls=2")
    ip.run(f"b = %mkl map greeter_on_dask --over $people --script {script}")
    assert all(row.outcome.calls == {"made": 0, "replayed": 1} for row in ip.shell.user_ns["b"].rows if row.outcome)


def test_a_tool_defined_in_the_notebook_runs_on_the_workers_with_the_globals_of_each_command(
    client: Any, ip: Any
) -> None:
    ip.run(
        "import os\nimport mkl_notebook\nGREETING = 'hello'\n"
        "@mkl_notebook.tool(effect='read')\n"
        "def whereabouts(name: str) -> str:\n    return f'{GREETING} {name} from {os.getpid()}'\n"
    )
    ip.define(GREETER.replace("greeter_on_dask", "greeter_here"))
    ip.shell.user_ns["people"] = [{"name": "ada"}, {"name": "bo"}, {"name": "cy"}]
    script = ip.script("none.yaml", {"llm": {}})
    ip.run(f"b = %mkl map greeter_here --over $people --executor dask --script {script}")
    first = ip.shell.user_ns["b"].results
    assert [line.split(" from ")[0] for line in first] == ["hello ada", "hello bo", "hello cy"]
    assert str(os.getpid()) not in {line.split(" from ")[1] for line in first}  # made on the cluster's workers
    ip.run("GREETING = 'welcome'")  # the next command's calls carry the notebook's globals as they are now
    ip.run(f"b = %mkl map greeter_here --id again --over $people --executor dask --script {script}")
    assert [line.split(" from ")[0] for line in ip.shell.user_ns["b"].results] == [
        "welcome ada",
        "welcome bo",
        "welcome cy",
    ]


# -- a batch whose workers all die -------------------------------------------------------------------------------

HELD = """\
machine: held
entry: look
budget: 5
result: out
context:
  name: ""
  pays: "no"
states:
  look:
    tool: look
    input: { name: "{{name}}" }
    output: seen
    gates:
      - { when: the row pays, hook: "eq:pays:yes", then: ok, to: pay }
      - { when: otherwise, then: ok, to: note }
  pay:
    tool: pay
    input: { name: "{{name}}" }
    output: out
    idempotent: false
    gates:
      - { when: otherwise, then: ok, to: END }
  note:
    tool: note
    input: { name: "{{name}}" }
    output: out
    gates:
      - { when: otherwise, then: ok, to: END }
"""

# `note` (a read) and `pay` (an effect) say they started, then hold until the test writes `release`.
HELD_TOOLS = """\
import os
import time

import mkl_notebook

FOLDER = os.path.dirname(os.path.abspath(__file__))


def _held(kind, name):
    with open(os.path.join(FOLDER, "started"), "a", encoding="utf-8") as started:
        started.write(f"{kind} {name}\\n")
    while not os.path.exists(os.path.join(FOLDER, "release")):
        time.sleep(0.02)
    return f"{kind} {name} done"


@mkl_notebook.tool(effect="read")
def look(name: str) -> str:
    return f"saw {name}"


@mkl_notebook.tool(effect="read")
def note(name: str) -> str:
    return _held("note", name)


@mkl_notebook.tool(effect="effect")
def pay(name: str) -> str:
    return _held("pay", name)
"""


# The gates' hooks need no model: an empty script says so.
MAP_HELD = ("map", "held.mkl", "--over", "rows.jsonl", "--key", "name", "--tools", "tools.py", "--script", "none.yaml")


def _worker_processes(pid: int) -> list[Any]:
    """The Dask worker processes a command's LocalCluster started (its nannies live in the command's process)."""
    import psutil

    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.Error:  # the command has ended
        return []
    found = []
    for child in children:
        try:
            if "spawn_main" in " ".join(child.cmdline()):
                found.append(child)
        except psutil.Error:  # gone already
            continue
    return found


def _map_on_dying_workers(folder: Path, rows: list[dict[str, str]], held: str) -> tuple[int, dict[str, Any], str]:
    """``mkl map`` on its own LocalCluster, one row at a time; once the call ``held`` has started, every worker
    is killed, and every worker its nannies start again after that: the command must end by itself."""
    (folder / "rows.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    command = [sys.executable, "-m", "mkl_notebook.cli", *MAP_HELD]
    env = {**env_without_models(), "DASK_DISTRIBUTED__SCHEDULER__NO_WORKERS_TIMEOUT": "2s"}
    mkl = subprocess.Popen(
        [*command, "--concurrency", "1", "--executor", "dask"],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    started = folder / "started"
    try:
        while held not in (started.read_text(encoding="utf-8").splitlines() if started.exists() else []):
            with contextlib.suppress(subprocess.TimeoutExpired):
                mkl.wait(0.05)
            assert mkl.returncode is None, f"mkl map ended before {held!r} started: {mkl.communicate()}"
        assert len(_worker_processes(mkl.pid)) >= 1
        ended = threading.Event()

        def keep_killing() -> None:
            while not ended.is_set():
                for worker in _worker_processes(mkl.pid):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(worker.pid, signal.SIGKILL)
                ended.wait(0.02)

        killer = threading.Thread(target=keep_killing, daemon=True)
        killer.start()
        try:
            out, err = mkl.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            pytest.fail("mkl map did not end after its Dask workers died")
        finally:
            ended.set()
            killer.join()
    finally:
        if mkl.returncode is None:
            mkl.kill()
            mkl.communicate()
    assert "Traceback" not in out + err, err
    return mkl.returncode, json.loads(out.strip().splitlines()[-1]), out


@pytest.mark.parametrize(
    ("held", "rows", "statuses"),
    [
        pytest.param(
            "pay ada",
            [{"name": "ada", "pays": "yes"}, {"name": "bo"}, {"name": "cy"}],
            {"held-ada": "in_doubt", "held-bo": "halt", "held-cy": "halt"},
            id="an-effect-in-flight",
        ),
        pytest.param(
            "note bo",
            [{"name": "bo"}, {"name": "ada", "pays": "yes"}, {"name": "cy"}],
            {"held-bo": "halt", "held-ada": "halt", "held-cy": "halt"},
            id="a-read-in-flight",
        ),
    ],
)
def test_a_batch_whose_workers_all_die_ends_and_running_it_again_finishes_it(
    tmp_path: Path, held: str, rows: list[dict[str, str]], statuses: dict[str, str]
) -> None:
    (tmp_path / "held.mkl").write_text(HELD, encoding="utf-8")
    (tmp_path / "tools.py").write_text(HELD_TOOLS, encoding="utf-8")
    (tmp_path / "none.yaml").write_text("llm: {}\n", encoding="utf-8")
    code, line, out = _map_on_dying_workers(tmp_path, rows, held)
    assert code == 1 and line["status"] == "halt"  # a batch with failed rows exits 1, as documented
    assert {row["run"]: row["status"] for row in line["rows"]} == statuses  # every row accounted for
    assert sum(line["counts"].values()) == len(rows) and f"Batch — {len(rows)} rows:" in out
    for row in line["rows"]:
        if row["status"] == "halt":  # failed, saying why and what to do
            assert "no Dask worker has been" in row["error"] and "run it again" in row["error"], row
    store = SQLiteStore(tmp_path / ".mkl" / "runs.sqlite")
    journaled = {}
    for run_id in statuses:  # no observation for a call whose answer never came
        journaled[run_id] = [r.get("name") for r in store.read(run_id) if r["t"] == "answer"]
        assert "pay" not in journaled[run_id] and "note" not in journaled[run_id]

    (tmp_path / "release").touch()  # the tools answer now; the rows run again on threads here
    code, line, _, err = mkl_cli(tmp_path, *MAP_HELD)
    again = {row["run"]: row for row in line["rows"]}
    assert again, err
    for run_id, status in statuses.items():
        if status == "in_doubt":  # a person settles it; the payment is not made twice
            assert again[run_id]["status"] == "in_doubt"
        else:
            assert again[run_id]["status"] == "done", again[run_id]
            assert again[run_id]["calls"]["replayed"] == len(journaled[run_id])  # what was answered replays
    assert code == (4 if "in_doubt" in statuses.values() else 0)
    assert (tmp_path / "started").read_text(encoding="utf-8").count("pay ada") == 1


# -- the command's own cluster, and the clusters a notebook gives ------------------------------------------------

MEETING = """\
machine: meeting
entry: meet
budget: 3
result: line
context:
  name: ""
states:
  meet:
    tool: meet
    input: { name: "{{name}}" }
    output: line
    gates:
      - { when: otherwise, then: ok, to: END }
"""

# Each call says it arrived, then waits until all of them have: it answers only if they were all in flight at once.
MEETING_TOOLS = """\
import os
import time

import mkl_notebook

FOLDER = os.path.dirname(os.path.abspath(__file__))
EVERYONE = int(os.environ["MEETING_SIZE"])


@mkl_notebook.tool(effect="read")
def meet(name: str) -> str:
    open(os.path.join(FOLDER, f"arrived-{name}"), "w").close()
    deadline = time.monotonic() + 30
    while sum(entry.startswith("arrived-") for entry in os.listdir(FOLDER)) < EVERYONE:
        if time.monotonic() > deadline or os.path.exists(os.path.join(FOLDER, "gave-up")):
            open(os.path.join(FOLDER, "gave-up"), "w").close()  # the calls after it give up at once
            raise RuntimeError("the others never came: not all calls were in flight at once")
        time.sleep(0.02)
    return f"{name} met everyone in process {os.getpid()}"
"""


def test_the_commands_own_cluster_makes_as_many_calls_at_once_as_asked_binding_no_fixed_port(tmp_path: Path) -> None:
    import socket

    everyone = 3 * (os.cpu_count() or 1) + 6  # more than the cores, so more than Dask's CPU sizing makes at once
    (tmp_path / "meeting.mkl").write_text(MEETING, encoding="utf-8")
    (tmp_path / "tools.py").write_text(MEETING_TOOLS, encoding="utf-8")
    (tmp_path / "none.yaml").write_text("llm: {}\n", encoding="utf-8")
    (tmp_path / "rows.jsonl").write_text("".join(f'{{"name": "p{n}"}}\n' for n in range(everyone)), encoding="utf-8")
    with contextlib.ExitStack() as held:
        taken = held.enter_context(socket.socket())
        with contextlib.suppress(OSError):  # Dask's default HTTP port, taken: a cluster wanting it would warn
            taken.bind(("127.0.0.1", 8787))
            taken.listen()
        code, line, _, err = mkl_cli(
            tmp_path,
            *("map", "meeting.mkl", "--over", "rows.jsonl", "--tools", "tools.py", "--script", "none.yaml"),
            *("--concurrency", str(everyone), "--executor", "dask"),
            env={"MEETING_SIZE": str(everyone)},
            timeout=180,
        )
    assert code == 0 and line["counts"] == {"done": everyone}, (line, err)
    assert all("met everyone" in row["result"] for row in line["rows"])
    assert str(os.getpid()) not in {row["result"].rsplit(" ", 1)[1] for row in line["rows"]}
    assert "8787" not in err and "already in use" not in err and "Traceback" not in err, err


def _scheduler_without_workers() -> Any:
    return distributed.LocalCluster(
        n_workers=0, processes=False, dashboard_address=":0", scheduler_kwargs={"dashboard": False}, silence_logs=40
    )


def test_a_cluster_given_that_cannot_hold_the_calls_asked_says_so_in_one_line(
    client: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mkl_notebook.app.executors import DaskStreams
    from mkl_notebook.executors.dask_worker import CALL_THREADS

    # A worker an earlier test killed is started again by its nanny: the cluster counted here is whole again,
    # the dead one gone and the new one in (polled, not slept on).
    deadline = time.monotonic() + 120
    while len(client.scheduler_info()["workers"]) != 2 and time.monotonic() < deadline:
        client.wait_for_workers(2, timeout=5)
    told: list[str] = []
    streams = DaskStreams(start_local=False, notice=told.append)
    address = client.scheduler.address
    try:
        streams.wrapper(f"dask://{address}", None, 8)
        streams.wrapper(f"dask://{address}", None, 2 * CALL_THREADS)
        assert told == []  # two workers hold that many calls at once: nothing to say
        streams.wrapper(f"dask://{address}", None, 2 * CALL_THREADS + 1)
        assert len(told) == 1
        assert f"has 2 workers, room for {2 * CALL_THREADS} calls at once, fewer than the" in told[0]
        assert "Add workers" in told[0]
    finally:
        streams.close()

    from mkl_notebook.app.settings import Settings
    from mkl_notebook.app.workspace import Workspace

    with dask.config.set({"distributed.scheduler.no-workers-timeout": "0.5s"}), _scheduler_without_workers() as empty:
        settings = Settings.from_flags(store=str(tmp_path / "s.sqlite"), executor=f"dask://{empty.scheduler_address}")
        registry = Registry()
        registry.tool(whereabouts, name="meet", effect="read")
        with Workspace(settings, registry=registry) as ws:
            ws.shelf.define(MEETING)
            ran = ws.map("meeting", [{"name": "ada"}], script={"llm": {}})
    assert ran.rows[0].status == "halt"  # no worker came: the call was not made
    lines = [text for text in capsys.readouterr().err.splitlines() if text]
    assert lines == [
        f"The Dask cluster at {empty.scheduler_address} has no worker: calls wait for one up to 0.5s, then fail. "
        f"Start workers for it (dask worker {empty.scheduler_address}), or make the calls here (executor threads)."
    ]
