"""What a long run writes stays small: the first and last steps, the count, and the command that shows the rest.

A 20,000-step run is executed in a real kernel (nbclient) and its saved outputs are measured as the
.ipynb holds them; ``%mkl trace RUN --all`` in the next cell shows every step. The command line caps
its trace the same way, and a big machine's visits and a wide fan-out's live line are capped in a real
IPython shell. A notebook of many runs waiting for a person stays small: each waiting run's outputs (its
form's printout, its view with its checkpoint, its diagram) are measured as a notebook executed like
JupyterLab saves them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat
import pytest
import yaml
from lab_client import run_all
from nbclient import NotebookClient

from mkl_notebook.render import diagram, views

from support import RUN_MIME, Cells, chain_source, env_without_models, mkl_cli, refund_notebook

STEPS = 20_000
SAVED_MAX = 300_000  # bytes of a run cell's outputs in the saved file
WAITING_RUN_MAX = 10_500  # bytes of a waiting run's outputs in the saved file (14.7 KB before issue 38; 9.6 KB now)
WAITING_SVG_MAX = 3_800  # ... of them its diagram's, the drawing and its text twin (6.3 KB before)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def loop(steps: int) -> str:
    """A machine that drafts again and again until its ceiling halts it: ``steps`` steps."""
    return f"""\
machine: loop
mklang: "0.4"
entry: again
budget: {steps + 5}
states:
  again:
    structure: A draft.
    prompt: Draft it again.
    output: draft
    max_visits: {steps}
    gates:
      - {{ when: otherwise, then: ok, to: again }}
"""


def _step_numbers(text: str) -> list[int]:
    """The step numbers of a text trace's rows of state ``again`` (its first column)."""
    rows = (line.split() for line in text.splitlines())
    return [int(row[0]) for row in rows if len(row) > 1 and row[0].isdigit() and row[1] == "again"]


def _saved_bytes(outputs: list[Any]) -> int:
    """The bytes a cell's outputs take in the saved file (as nbformat writes them: one-space indent)."""
    return len(json.dumps(outputs, sort_keys=True, indent=1, ensure_ascii=False).encode("utf-8"))


def _written_bytes(cell: Any) -> int:
    """The bytes ``cell``'s outputs add to a notebook file, exactly as nbformat writes it (lines split)."""
    bare = nbformat.from_dict(json.loads(json.dumps(cell)))
    bare.outputs = []
    one, none = nbformat.v4.new_notebook(cells=[cell]), nbformat.v4.new_notebook(cells=[bare])
    return len(nbformat.writes(one).encode("utf-8")) - len(nbformat.writes(none).encode("utf-8"))


def _text(output: Any) -> str:
    text = output["data"]["text/plain"]
    return "".join(text) if isinstance(text, list) else str(text)


def test_a_20000_step_runs_saved_output_stays_under_300_kb_and_trace_all_shows_every_step(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text(yaml.safe_dump({"llm": {"produce": []}}), encoding="utf-8")
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext mkl_notebook"),
        nbformat.v4.new_code_cell("%%mkl\n" + loop(STEPS)),
        nbformat.v4.new_code_cell("%mkl run loop --id long --script s.yaml"),
        nbformat.v4.new_code_cell("%mkl trace long --all"),
    ]
    client = NotebookClient(nb, kernel_name="python3", timeout=600, resources={"metadata": {"path": str(tmp_path)}})
    client.execute(env=env_without_models())
    path = tmp_path / "long.ipynb"
    nbformat.write(nb, path)
    saved = nbformat.read(path, as_version=4)
    outputs = saved.cells[2].outputs
    assert not [o for o in outputs if o.output_type == "error"], outputs

    assert _saved_bytes(outputs) < SAVED_MAX
    view = next(o for o in outputs if RUN_MIME in o.get("data", {}))
    text, page = _text(view), "".join(view["data"]["text/html"])
    assert "Halted: loop-ceiling at again" in text and "20,000 steps" in text
    assert _step_numbers(text.split("Trace of long", 1)[1]) == [*range(1, 21), *range(19_981, 20_001)]
    left_out = "… 19,960 steps not shown (steps 21 to 19,980): %mkl trace long --all shows every step"
    assert left_out in text.splitlines()
    assert "Trace and visits of long — 20,000 steps" in page
    assert "<code>%mkl trace long --all</code> shows every step" in page
    assert "<td>19980</td>" not in page and "<td>19981</td>" in page
    drawn = next(o for o in outputs if diagram.SVG_MIME in o.get("data", {}))
    assert ">again ×20000 · halted</text>" in "".join(drawn["data"][diagram.SVG_MIME])

    every = saved.cells[3].outputs
    assert not [o for o in every if o.output_type == "error"], every
    whole = _text(every[-1])
    assert whole.splitlines()[0] == "Trace — 20,000 steps" and "not shown" not in whole
    assert _step_numbers(whole) == list(range(1, STEPS + 1))
    assert "".join(every[-1]["data"]["text/html"]).count("<tr>") == STEPS + 1  # the head and every step


def test_a_waiting_runs_saved_outputs_stay_under_13_kb(tmp_path: Path) -> None:
    path = tmp_path / "waiting.ipynb"
    refund_notebook(path, {f"waiting-{index}": f"Parcel A-{index} arrived broken" for index in range(2)})
    run_all(path, env=env_without_models())
    for cell in nbformat.read(path, as_version=4).cells[2:]:
        outputs = cell.outputs
        view = next(o for o in outputs if RUN_MIME in o.get("data", {}))
        drawn = next(o for o in outputs if diagram.SVG_MIME in o.get("data", {}))
        assert "Pending (escalated)" in _text(view), outputs  # the run waits, and its form was drawn
        assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in outputs)
        assert ">confirm · pending</text>" in "".join(drawn["data"][diagram.SVG_MIME])
        assert _written_bytes(cell) < WAITING_RUN_MAX, _written_bytes(cell)
        diagram_only = nbformat.from_dict(json.loads(json.dumps(cell)))
        diagram_only.outputs = [drawn]
        assert _written_bytes(diagram_only) < WAITING_SVG_MAX, _written_bytes(diagram_only)
        # Every state it entered, it entered once, and no state has a ceiling: the trace says all the visits would
        summary = f"<summary>Trace of {cell.source.split()[4]} — 1 step</summary>"
        assert "Visits of" not in _text(view) and summary in "".join(view["data"]["text/html"])


def test_the_command_line_caps_its_trace_and_prints_it_whole_when_asked(tmp_path: Path) -> None:
    (tmp_path / "loop.mkl").write_text(loop(200), encoding="utf-8")
    (tmp_path / "s.yaml").write_text(yaml.safe_dump({"llm": {"produce": []}}), encoding="utf-8")
    code, status, out, err = mkl_cli(tmp_path, "run", "loop.mkl", "--id", "long", "--script", "s.yaml")
    assert code == 1 and status["status"] == "halt", err
    assert _step_numbers(out) == [*range(1, 21), *range(181, 201)]
    assert "… 160 steps not shown (steps 21 to 180): mkl trace --id long --all shows every step" in out.splitlines()

    code, status, out, err = mkl_cli(tmp_path, "trace", "--id", "long", "--all")
    assert code == 0 and status["run"] == "long", err
    assert _step_numbers(out) == list(range(1, 201)) and "not shown" not in out
    assert "Halted: loop-ceiling at again" in out and "0 new calls" not in out

    code, _, out, err = mkl_cli(tmp_path, "trace", "--id", "long", "--store", ".mkl/runs.sqlite")
    assert code == 0, err
    assert "mkl trace --id long --store .mkl/runs.sqlite --all shows every step" in out
    assert _step_numbers(out) == [*range(1, 21), *range(181, 201)]

    code, status, out, err = mkl_cli(tmp_path, "run", "loop.mkl", "--id", "long", "--all")
    assert code == 1 and status["calls"]["made"] == 0, err  # replayed from the journal, every step printed
    assert _step_numbers(out) == list(range(1, 201))

    code, status, _, err = mkl_cli(tmp_path, "trace", "--id", "ghost")
    assert code == 2 and "no run 'ghost'" in err


def test_a_big_machines_view_diagram_and_visits_stay_bounded_and_visits_all_lists_every_state(ip: Cells) -> None:
    ip.define(chain_source(5_000))
    definition = ip.out.last(diagram.SVG_MIME)
    assert (
        len(definition[diagram.SVG_MIME]) < 40_000 and "… 4,940 more states, not drawn" in definition[diagram.SVG_MIME]
    )
    script = ip.script("s.yaml", {"llm": {"produce": []}})
    ip.out.clear()
    ip.run(f"%mkl run chain --id big --script {script} --max-steps 300")
    view, drawn = ip.out.last(RUN_MIME), ip.out.last(diagram.SVG_MIME)
    assert len(view["text/html"]) + len(view["text/plain"]) < 60_000
    assert len(drawn[diagram.SVG_MIME]) < 40_000
    assert "Visits of chain — the 40 states entered most, of 5,000" in view["text/plain"]
    assert "%mkl visits big --all lists every state" in view["text/plain"]
    assert "… and 4,940 more states, not shown" in drawn["text/plain"]
    ip.out.clear()
    ip.run("%mkl visits big --all")
    listed = ip.out.last("text/plain")["text/plain"].splitlines()
    assert listed[0] == "Visits of chain" and len(listed) == 2 + 5_000
    ip.out.clear()
    ip.run("%mkl visits big")
    assert "the 40 states entered most" in ip.out.last("text/plain")["text/plain"]


def test_a_wide_fan_outs_live_line_lists_the_branches_at_work_and_counts_the_others(ip: Cells) -> None:
    count = 150
    ip.define(
        f"""\
machine: wide
entry: each
budget: 5
context:
  items: {list(range(count))}
states:
  each:
    over: "{{{{items}}}}"
    structure: A line.
    prompt: "A line about {{{{item}}}}."
    output: lines
    gates:
      - {{ when: otherwise, then: ok, to: END }}
"""
    )
    script = ip.script("fan.yaml", {"llm": {"produce": ["one small line here"] * count, "stream": 0.01}})
    ip.out.clear()
    ip.run(f"%mkl run wide --script {script}")
    live = [p.data["text/plain"] for p in ip.out.published if str(p.data.get("text/plain", "")).startswith("running")]
    counted = [text for text in live if f"of {count} branches:" in text]
    assert counted, live
    for text in live:
        assert len(text.splitlines()) <= 1 + views.FIRST_ROWS + views.LAST_ROWS + 1, text
    assert any("waiting" in text.splitlines()[-1] and "done" in text.splitlines()[-1] for text in counted)
