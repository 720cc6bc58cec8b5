"""The ``%mkl`` subcommands that read and show (trace, visits, plan, runs, inbox, audit, diff) and those about
machines (check, test, freeze, stdlib, load, models): nothing here advances a run.

:class:`ReadingCommands` is mixed into :class:`~mkl_notebook.notebook.magics.MklMagics`, which dispatches
``%mkl NAME`` to its ``_cmd_NAME``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from IPython.core.error import UsageError
from IPython.display import display

from ..app.audit import workspace_audit
from ..app.diffing import diff_runs, run_ref
from ..app.freezing import freeze
from ..app.inbox import inbox
from ..app.plan_over import PlanOverRequest, plan_over
from ..app.requests import InboxRequest, from_flags
from ..app.status import traced
from ..app.terms import TIERS
from ..app.workspace import Workspace
from ..render import views
from ..render.audit_views import audit_bundle
from ..render.diagram import diagram_bundle
from ..render.diff_views import diff_bundle
from ..render.inbox_views import inbox_bundle
from ..render.plan_views import plan_bundle, plan_over_bundle
from .magic_args import Values


class ReadingCommands:
    """``%mkl trace/visits/plan/runs/inbox/audit/diff/check/test/freeze/stdlib/load/models``."""

    session: Workspace
    values: Values
    _parse: Callable[[str, list[str]], argparse.Namespace]  # the magics' own: the subcommand's flags, parsed
    _show_definition: Callable[..., None]  # the magics' own: a machine's diagram and warnings

    # -- reading -------------------------------------------------------------------------------

    def _cmd_trace(self, words: list[str]) -> None:
        args = self._parse("trace", words)
        outcome = self.session.read(self.values.text(args.run_id))  # nothing is called or recorded
        steps, answers = traced(outcome)  # as `mkl trace` shows them, each answer with the key that signed it
        cap = replace(views.notebook_cap(outcome.run_id), full=args.full)
        display(
            {
                "text/html": views.trace_table_html(steps, answers=answers, cap=cap),
                "text/plain": views.trace_table_text(steps, answers=answers, cap=cap),
            },
            raw=True,
        )

    def _cmd_visits(self, words: list[str]) -> None:
        args = self._parse("visits", words)
        outcome = self.session.read(self.values.text(args.run_id))  # nothing is called or recorded
        result = outcome.result
        machine = outcome.machines.get(outcome.root)
        if machine is None:
            raise UsageError(f"the machine of run '{outcome.run_id}' cannot be read from its journal")
        cap = replace(views.notebook_cap(outcome.run_id), full=args.full)
        display(
            {
                "text/html": views.visits_table_html(machine, result.visits, result.diagnosis, cap=cap),
                "text/plain": views.visits_table_text(machine, result.visits, result.diagnosis, cap=cap),
            },
            raw=True,
        )

    def _cmd_plan(self, words: list[str]) -> None:
        args = self._parse("plan", words)
        named = self.values.text(args.run_id)
        if not args.over and not args.stores:
            display(plan_bundle(self.session.plan(named).as_dict()), raw=True)
            return
        machine = self.session.shelf.machine(named)  # %mkl plan NAME --over DIR: every run of that machine there
        folders, stores = (tuple(map(self.values.text, given or ())) for given in (args.over, args.stores))
        request = PlanOverRequest(machine.name, folders, stores)
        found = plan_over(request, self.session.shelf.callees(machine), self.session.keyring)  # reading only
        if args.json:
            print(json.dumps(found.rows, ensure_ascii=True, default=str))
        else:
            display(plan_over_bundle(found.as_dict()), raw=True)

    def _cmd_runs(self, words: list[str]) -> None:
        rows = [
            (
                listed["run"],
                listed["machine"] or "",
                listed["status"],
                listed["error"] or "",
                listed["at"] or "",
                views.spent_cell(listed.get("cost_usd")),
            )
            for listed in self.session.listing()
        ]
        display(views.runs_bundle(rows), raw=True)

    def _cmd_inbox(self, words: list[str]) -> None:
        args = self._parse("inbox", words)
        folders, stores = (tuple(map(self.values.text, given)) for given in (args.folders or ["."], args.stores))
        store = str(self.session.settings.store)
        asked = from_flags(
            InboxRequest, args, self.values.text, folders=folders, stores=stores, configured=store, via="magic"
        )
        found = inbox(asked, self.session.keyring)  # reading only: nothing is made or written
        if args.json:
            print(json.dumps(found.rows, ensure_ascii=True, default=str))
        else:
            display(inbox_bundle(found.rows, found.problems, full=args.full), raw=True)

    def _cmd_audit(self, words: list[str]) -> None:
        target = self.values.maybe_text(self._parse("audit", words).target)
        found = workspace_audit(self.session, target)  # reading only: nothing is made or written
        display(audit_bundle(found.answers, found.pending, found.problems, found.median_seconds()), raw=True)

    def _cmd_diff(self, words: list[str]) -> None:
        args = self._parse("diff", words)
        a, b = (run_ref(self.values.text(spec)) for spec in (args.run_a, args.run_b))
        found = diff_runs(a, b, self.session).as_dict()  # reading only: nothing is called or written
        if args.json:
            print(json.dumps(found, ensure_ascii=True, default=str))
        else:
            display(diff_bundle(found), raw=True)

    # -- machines ------------------------------------------------------------------------------

    def _cmd_check(self, words: list[str]) -> None:
        name = self.values.text(self._parse("check", words).name)
        findings = self.session.shelf.check(name)
        if not findings:
            print(f"{name}: no findings")
        for finding in findings:
            print(finding)

    def _cmd_test(self, words: list[str]) -> None:
        args = self._parse("test", words)
        outcomes = self.session.shelf.test(self.values.text(args.name), Path(self.values.text(args.script)))
        display(
            {"text/html": views.scenario_table_html(outcomes), "text/plain": views.scenario_table_text(outcomes)},
            raw=True,
        )

    def _cmd_freeze(self, words: list[str]) -> None:
        args = self._parse("freeze", words)
        run_id, output = self.values.text(args.run_id), self.values.maybe_text(args.output)
        frozen = freeze(self.session, run_id, output, force=args.force)  # read as %mkl trace reads it
        print(frozen.line(f"test it with: %mkl test {frozen.machine} --script {frozen.path}"))

    def _cmd_stdlib(self, words: list[str]) -> None:
        name = self._parse("stdlib", words).name
        if name is None:
            library, shadowed = self.session.shelf.library()
            html_table, text = views.library_html(library, shadowed), views.library_text(library, shadowed)
            display({"text/html": html_table, "text/plain": text}, raw=True)
            return
        machine = self.session.shelf.library_machine(self.values.text(name))
        display(diagram_bundle(machine), raw=True)
        display({"text/markdown": f"```yaml\n{machine.source}```", "text/plain": machine.source}, raw=True)

    def _cmd_load(self, words: list[str]) -> None:
        machine = self.session.shelf.load(self.values.text(self._parse("load", words).path))
        self._show_definition(machine, calls_known=True)

    def _cmd_models(self, words: list[str]) -> None:
        self._parse("models", words)
        config = self.session.equipment.model_config()
        rows = [(tier, config.model_for(tier), config.tiers[tier].source) for tier in TIERS]
        rows.append(("judge", config.judge, config.judge_source))
        width = max(len(model or "") for _, model, _ in rows) or 1
        for tier, model, source in rows:
            if model is None:
                unset = "(each state's tier model)" if tier == "judge" else "(not configured)"
                print(f"{tier:<9} {unset}")
            else:
                print(f"{tier:<9} {model:<{width}}  from {source}")
        if not config.configured:
            print("No tier has a model: runs need --script, or %mkl config model=… (docs/language.md §9).")
