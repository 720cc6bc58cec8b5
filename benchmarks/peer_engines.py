"""The engines benchmarks/peers.py compares, each on a store it is given: mkl_notebook (a run store), LangGraph (a
checkpointer) and DBOS (a system database URL), on SQLite or PostgreSQL. What each does is in peers.py's docstring.

The peers' packages are imported only inside these classes (they are extras of the benchmark).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

from run import linear  # benchmarks/run.py, beside this file

ASK = "Approve the last step?"
# How long a DBOS workflow waits for the reply before its thread gives up; the wait is durable, so a resumed
# workflow whose message was sent before finds it however late it is resumed.
RECV_TIMEOUT = 10.0


def model(step: int, previous: str) -> str:
    """The trivial deterministic "model" every engine calls once per step."""
    return f"answer {step} after {previous[:24]}"


# -- mkl_notebook ------------------------------------------------------------------------------------


def gated(n: int) -> dict[str, Any]:
    """``linear(n)`` whose state before the last asks a person before the last one runs."""
    document = linear(n)
    document["machine"] = f"gated{n}"
    document["states"][f"s{n - 2}"]["gates"] = [
        {"when": "the last step needs a sign-off", "escalate": True, "to": f"s{n - 1}", "ask": ASK},
        {"when": "otherwise", "then": "ok", "to": f"s{n - 1}"},
    ]
    return document


class Ours:
    """mkl_notebook: one run store (``open_store(location, durability=…)``) kept open across the runs, the
    scripted oracle answering."""

    def __init__(self, steps: int, location: str, durability: str = "process") -> None:
        from mkl_notebook.durable.store_opening import open_store
        from mkl_notebook.engine.options import RunOptions
        from mkl_notebook.lang.loader import machine_from_mapping

        self.linear = machine_from_mapping(linear(steps), strict=False)
        self.gated = machine_from_mapping(gated(steps), strict=False)
        self.store = open_store(location, durability=durability)
        self.options = RunOptions()
        self.asking = RunOptions(hitl="asking", suspendable=True)
        self.steps = steps
        self.counter = iter(range(10**9))
        self.waiting: list[tuple[str, str]] = []

    def oracle(self, judge: bool = False) -> Any:
        from mkl_notebook.providers.scripted import oracle_from_script

        return oracle_from_script({"llm": {"produce": [], **({"judge": [0]} if judge else {})}})

    def run(self) -> None:
        from mkl_notebook.durable import runs

        outcome = runs.start(
            self.linear, self.oracle(), store=self.store, run_id=f"run-{next(self.counter)}", options=self.options
        )
        assert outcome.status == "done", outcome.status

    def bare(self) -> None:
        from mkl_notebook.engine.runner import run_machine

        assert run_machine(self.linear, self.oracle(), options=self.options).status == "done"

    def suspend(self, count: int) -> None:
        from mkl_notebook.durable import runs

        for _ in range(count):
            run_id = f"wait-{next(self.counter)}"
            outcome = runs.start(
                self.gated, self.oracle(judge=True), store=self.store, run_id=run_id, options=self.asking
            )
            question = outcome.result.question_id(run_id)
            assert outcome.status == "suspended" and question, outcome.status
            assert len(outcome.result.trace) == self.steps - 1, len(outcome.result.trace)
            self.waiting.append((run_id, question))

    def close(self) -> None:
        from mkl_notebook.durable.store_opening import close_store

        close_store(self.store)

    def resume(self) -> None:
        from mkl_notebook.durable import runs

        run_id, question = self.waiting.pop()
        outcome = runs.resume_journal(
            self.store,
            run_id,
            self.oracle(judge=True),
            reply="approve",
            has_reply=True,
            question=question,
            known={self.gated.name: self.gated},  # the machine this host holds (LangGraph's holds its graph)
        )
        assert outcome.status == "done", outcome.status
        assert outcome.calls["made"] == 1, outcome.calls


# -- LangGraph ---------------------------------------------------------------------------------------


def _saver(location: str) -> tuple[Any, Callable[[], None]]:
    """LangGraph's checkpointer on ``location`` (a file, or a ``postgresql://`` URL) and what closes it."""
    if location.startswith("postgresql://"):
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row

        # As PostgresSaver.from_conn_string opens it: autocommit, so each checkpoint is its own transaction.
        server = psycopg.Connection.connect(location, autocommit=True, prepare_threshold=0, row_factory=dict_row)
        return PostgresSaver(server), server.close
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    connection = sqlite3.connect(location, check_same_thread=False)
    return SqliteSaver(connection), connection.close


class LangGraph:
    """A StateGraph of N nodes in a line over a checkpointer on one connection (and, for the bare row, none):
    a SqliteSaver on a file, or a PostgresSaver on a ``postgresql://`` database."""

    def __init__(self, steps: int, location: str) -> None:
        self.steps = steps
        self.saver, self.close = _saver(location)
        self.saver.setup()
        self.graph = self._graph(gate=False).compile(checkpointer=self.saver)
        self.bare_graph = self._graph(gate=False).compile()
        self.gated = self._graph(gate=True).compile(checkpointer=self.saver)
        self.counter = iter(range(10**9))
        self.waiting: list[str] = []

    def _graph(self, gate: bool) -> Any:
        from langgraph.graph import END as LG_END
        from langgraph.graph import START as LG_START
        from langgraph.graph import StateGraph
        from langgraph.types import interrupt
        from typing_extensions import TypedDict

        class State(TypedDict):
            last: str

        def node(step: int) -> Callable[[State], dict[str, str]]:
            def call(state: State) -> dict[str, str]:
                if gate and step == self.steps - 1:
                    assert interrupt(ASK) == "approve"
                return {"last": model(step, state["last"])}

            return call

        builder = StateGraph(State)
        for step in range(self.steps):
            builder.add_node(f"s{step}", node(step))
            builder.add_edge(f"s{step - 1}" if step else LG_START, f"s{step}")
        builder.add_edge(f"s{self.steps - 1}", LG_END)
        return builder

    def _config(self, thread: str) -> dict[str, Any]:
        return {"configurable": {"thread_id": thread}, "recursion_limit": self.steps + 10}

    def run(self, durability: str = "sync") -> None:
        config = self._config(f"run-{next(self.counter)}")
        out = self.graph.invoke({"last": "the start"}, config, durability=durability)
        assert out["last"].startswith(f"answer {self.steps - 1} "), out

    def run_async(self) -> None:
        self.run("async")

    def bare(self) -> None:
        out = self.bare_graph.invoke({"last": "the start"}, self._config("bare"))
        assert out["last"].startswith(f"answer {self.steps - 1} "), out

    def suspend(self, count: int) -> None:
        for _ in range(count):
            thread = f"wait-{next(self.counter)}"
            out = self.gated.invoke({"last": "the start"}, self._config(thread), durability="sync")
            assert "__interrupt__" in out and out["last"].startswith(f"answer {self.steps - 2} "), out
            self.waiting.append(thread)

    def resume(self) -> None:
        from langgraph.types import Command

        config = self._config(self.waiting.pop())
        out = self.gated.invoke(Command(resume="approve"), config, durability="sync")
        assert out["last"].startswith(f"answer {self.steps - 1} "), out


# -- DBOS --------------------------------------------------------------------------------------------


class Dbos:
    """One DBOS workflow of N steps, its system database at ``url`` (``sqlite:///FILE`` or ``postgresql://``)."""

    def __init__(self, steps: int, url: str) -> None:
        from dbos import DBOS

        self.steps = steps
        # Logging at CRITICAL: each cancelled wait's thread logs an error with a traceback as it ends, which is
        # expected here (the setup then checks that no reply was recorded); what goes wrong otherwise raises.
        DBOS(config={"name": "mkl-peers", "system_database_url": url, "log_level": "CRITICAL"})

        @DBOS.step()
        def call(step: int, previous: str) -> str:
            return model(step, previous)

        @DBOS.workflow()
        def line(n: int) -> str:
            last = "the start"
            for step in range(n):
                last = call(step, last)
            return last

        @DBOS.workflow()
        def waiting(n: int) -> str:
            last = "the start"
            for step in range(n - 1):
                last = call(step, last)
            assert DBOS.recv("approval", timeout_seconds=RECV_TIMEOUT) == "approve"
            return call(n - 1, last)

        @DBOS.workflow()
        def live(n: int) -> str:
            last = "the start"
            for step in range(n - 1):
                last = call(step, last)
            assert DBOS.recv("approval", timeout_seconds=3600) == "approve"
            return call(n - 1, last)

        self.line, self.waiting_workflow, self.live_workflow = line, waiting, live
        self.live: list[tuple[str, Any]] = []
        DBOS.launch()
        self.counter = iter(range(10**9))
        self.waiting: list[str] = []

    def run(self) -> None:
        from dbos import SetWorkflowID

        with SetWorkflowID(f"run-{next(self.counter)}"):
            assert self.line(self.steps).startswith(f"answer {self.steps - 1} ")

    def suspend(self, count: int) -> None:
        from dbos import DBOS, SetWorkflowID

        handles = []
        for _ in range(count):
            workflow = f"wait-{next(self.counter)}"
            with SetWorkflowID(workflow):
                handles.append(DBOS.start_workflow(self.waiting_workflow, self.steps))
            deadline = time.monotonic() + 120
            while not any(step["function_name"] == "DBOS.sleep" for step in DBOS.list_workflow_steps(workflow)):
                assert time.monotonic() < deadline, "a DBOS workflow never reached its wait"
                time.sleep(0.01)
            DBOS.cancel_workflow(workflow)  # while it waits: its wait ends with no reply recorded
            self.waiting.append(workflow)
        for handle in handles:
            # Its thread gives up waiting after RECV_TIMEOUT and finds itself cancelled: none is left running.
            with contextlib.suppress(Exception):
                handle.get_result()
        for workflow in self.waiting:
            names = [step["function_name"] for step in DBOS.list_workflow_steps(workflow)]
            assert DBOS.get_workflow_status(workflow).status == "CANCELLED" and "DBOS.recv" not in names, names

    def resume(self) -> None:
        from dbos import DBOS

        workflow = self.waiting.pop()
        DBOS.send(workflow, "approve", "approval")
        result = DBOS.resume_workflow(workflow).get_result(polling_interval_sec=0.005)
        assert result.startswith(f"answer {self.steps - 1} "), result

    def suspend_live(self, count: int) -> None:
        """``count`` workflows left waiting in ``recv`` in their threads (what a process that stops loses)."""
        from dbos import DBOS, SetWorkflowID

        for _ in range(count):
            workflow = f"live-{next(self.counter)}"
            with SetWorkflowID(workflow):
                self.live.append((workflow, DBOS.start_workflow(self.live_workflow, self.steps)))
        deadline = time.monotonic() + 120
        for workflow, _handle in self.live:
            while not any(step["function_name"] == "DBOS.sleep" for step in DBOS.list_workflow_steps(workflow)):
                assert time.monotonic() < deadline, "a DBOS workflow never reached its wait"
                time.sleep(0.01)

    def resume_live(self) -> None:
        from dbos import DBOS

        workflow, handle = self.live.pop()
        DBOS.send(workflow, "approve", "approval")
        result = handle.get_result()
        assert result.startswith(f"answer {self.steps - 1} "), result

    def close(self) -> None:
        from dbos import DBOS

        DBOS.destroy()
