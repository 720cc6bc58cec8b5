"""The scenario and conformance runner, now :mod:`mkl_notebook.app.scenarios`; this path is kept for one release."""

from __future__ import annotations

from .app.scenarios import (
    EXPECT_KEYS,
    RUN_OPTION_KEYS,
    SCENARIO_KEYS,
    Scenario,
    ScenarioFileError,
    ScenarioResult,
    load_cases,
    load_scenarios,
    run_all,
    run_scenario,
    scenario_options,
    scenarios_from_file,
    scenarios_from_mapping,
    scenarios_summary,
)

Outcome = ScenarioResult  # the old names
run_options = scenario_options
summary = scenarios_summary

__all__ = [
    "EXPECT_KEYS",
    "RUN_OPTION_KEYS",
    "SCENARIO_KEYS",
    "Outcome",
    "Scenario",
    "ScenarioFileError",
    "ScenarioResult",
    "load_cases",
    "load_scenarios",
    "run_all",
    "run_options",
    "run_scenario",
    "scenario_options",
    "scenarios_from_file",
    "scenarios_from_mapping",
    "scenarios_summary",
    "summary",
]
