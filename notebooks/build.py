"""Write the tutorial notebooks from the cells below and execute them, so they ship with real outputs.

    python notebooks/build.py

Cells whose output is stable carry nbval's ``nbval-check-output`` tag (in the cell's metadata, out of the
reader's sight) so that the test suite (nbval, lax mode) holds them to it; everything else is only required
to run.

The tutorials ship with their outputs to read, but without the runs' checkpoints: a checkpoint is signed by
whoever ran it (here, whoever built the tutorials), a key no reader knows, so a shipped run could only be
taken up with a warning about a stranger's key. Without them, a reader's first Run All makes runs of their own.
Their metadata names the kernel as the installed ipykernel does, and their diagrams carry no mermaid source,
so that opening one in JupyterLab does not mark it modified.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

import nbformat
from jupyter_client.kernelspec import KernelSpecManager

from mkl_notebook.checkpoints.envelope import BATCH_MIME_TYPE, MIME_TYPE, REF_MIME_TYPE

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
from lab_client import run_all  # noqa: E402  (executes as JupyterLab does: cell ids and the notebook's path)

# As in an activated venv (and as the tests run them): this installation's `mkl` is on PATH, so the commands
# the tutorials print start with plain `mkl` however the build was started.
os.environ["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])

CHECKED_TAG = "nbval-check-output"  # nbval holds the cell's output to the saved one, even in lax mode
RUN_CHECKPOINTS = (MIME_TYPE, REF_MIME_TYPE, BATCH_MIME_TYPE)


def md(text: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_markdown_cell(text.strip())


def code(text: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_code_cell(text.strip())


def checked(text: str) -> nbformat.NotebookNode:
    """A code cell whose output is stable: the tests hold it to its saved output (the tag, not a comment the
    reader would see)."""
    return nbformat.v4.new_code_cell(text.strip(), metadata={"tags": [CHECKED_TAG]})


def machine_cell(name: str, header: str = "%%mkl") -> nbformat.NotebookNode:
    return code(f"{header}\n" + (HERE / "data" / f"{name}.mkl").read_text(encoding="utf-8"))


QUICKSTART = [
    md("""
# Quickstart: define a machine, run it, read the trace

An **mkl machine** is a small YAML state machine for an LLM workflow: each state asks a model
(or a tool, or another machine) for an output, and its *gates* decide where the run goes next.
This notebook defines one, runs it offline, and reads what happened.

Everything here runs without a model or an API key: a *script* of canned answers stands in
for the LLM (see `data/triage.script.yaml`). Notebook 06 shows how to use a real model.
"""),
    code("%load_ext mkl_notebook"),
    md("""
## Define a machine

A `%%mkl` cell defines (or redefines) the machine named by its `machine:` key. The output is
the machine drawn as a state diagram. `classify` asks the model what kind of ticket this is;
its first gate is a plain-language condition that a *judge* model checks, the second is the
catch-all `otherwise`.
"""),
    machine_cell("triage"),
    md("""
## Run it

`%mkl run` starts a run. `--set` gives the machine its input; `--script` supplies the scripted
answers. The output shows the result, a trace table (one row per step) and a visits table,
then the diagram again with the path the run took.
"""),
    code('%mkl run triage --set ticket="My card was charged twice for one order" --script data/triage.script.yaml'),
    md("""
## Read the trace

`%mkl trace RUN` shows the steps again. *decided by* says whether the model, a host hook or
the `otherwise` catch-all chose the gate; the line under the table says what its words and marks
mean. A run's id defaults to its machine's name.
"""),
    code("%mkl trace triage"),
    md("The same facts are there for Python code:"),
    checked(
        """import mkl_notebook

run = mkl_notebook.get_run("triage")
print(run.status)
print(run.result)
print([step["state"] for step in run.trace])"""
    ),
    md("""
## Re-running is free

Every model answer is journaled. Running the same cell again replays the journal: same result,
no model calls. (`--fresh` starts over.) The cell's output is the same too, so the saved notebook
does not change when an unchanged cell runs again; the run's `calls` say what this showing cost.
"""),
    code('%mkl run triage --set ticket="My card was charged twice for one order" --script data/triage.script.yaml'),
    checked('print(mkl_notebook.get_run("triage").calls)'),
    md("""
## Watch it write

While a model writes, its answer grows in the line above the run, which also shows the state,
the steps, the tokens and the time so far; when the step is done the finished run takes its
place. A script can stream as well: `data/story.script.yaml` sends a word every 80 ms, so you
can watch it here offline. A re-run replays the journal at once and never streams.

`%mkl run` gives the run as a value: `r.result`, `r.context` and `r.trace` (plain dicts;
`r.trace_frame()` makes a pandas DataFrame when pandas is installed). With a real model the
trace shows each step's model time and cost, priced from litellm's local price list; a scripted
answer costs nothing, so no cost is shown (notebook 06 shows a real model).
"""),
    machine_cell("story"),
    code("r = %mkl run story --script data/story.script.yaml"),
    checked('print(r.status, "-", len(r.result.split()), "words:", r.result[:40], "…")'),
]

APPROVAL = [
    md("""
# Human approval: a run that waits for a person

An `escalate` gate with an `ask:` hands the decision to a person. In a notebook the run
**suspends** there and shows a form with the question the machine's author wrote. Clicking
**Approve** (or typing a reply) records the answer and resumes the run in the same output.

This machine drafts a reply to a customer. If the draft promises a refund it asks for approval,
and before sending it asks once more.
"""),
    code("%load_ext mkl_notebook"),
    machine_cell("refund"),
    md("""
## Run it

The run stops at the first gate and shows the form. Click **Approve**: the run goes on, and the
second question appears in the same place. Approve it too and the result appears.
"""),
    code(
        '%mkl run refund --id approval-demo --set ticket="Parcel A-1001 arrived broken" '
        "--script data/refund.script.yaml"
    ),
    md("""
## The same from Python

The cell above returned as soon as the run suspended: nothing blocks while it waits.
`%mkl pending` lists every run waiting for a person, with its form.

From Python the same loop is available: `run.pending` says what a run waits for, and
`submit` answers exactly that question, as the form does. This cell runs the machine once
more under another id and answers both questions itself:
"""),
    checked(
        """import mkl_notebook

api = mkl_notebook.run(
    "refund",
    id="approval-api",
    input={"ticket": "Parcel A-1001 arrived broken"},
    script="data/refund.script.yaml",
)
print(api.status, "at", api.at, "-", api.pending["ask"])
api.submit("approve")
print(api.status, "at", api.at, "-", api.pending["ask"])
api.submit("approve")
print(api.status, "-", api.result)"""
    ),
    md("""
## What Reject does

A reply is only data: what **Reject** means is up to the machine. This one routes on it —
`confirm`'s first gate is the built-in hook `neq:refund_approval:approve`, so anything but an
approval withdraws the reply instead of sending it (see `data/refund.mkl`). Text typed beside
**Approve** or **Reject** is the answer's note: the decision stays exactly `approve` or `reject`, and
the machine can read the note at `refund_approval_note` (`api.submit("approve", note="…")` gives one too):
"""),
    checked(
        """rejected = mkl_notebook.run(
    "refund",
    id="approval-rejected",
    input={"ticket": "Parcel A-1001 arrived broken"},
    script="data/refund.script.yaml",
)
rejected.submit("reject")
print(rejected.status, "-", rejected.result)
print(" -> ".join(step["state"] for step in rejected.trace))"""
    ),
    md("""
Re-running a cell replays it: the journal answers every question the cell already asked, so
**Restart & Run All** shows each cell as you left it, the form's answers included, without
calling a model again. `--fresh` starts a run over and brings its forms back.
"""),
]

SHARING = [
    md("""
# Share a notebook, resume it elsewhere

A run's checkpoint is saved **inside the notebook** (in its output, as
`application/vnd.mkl.run+json`). Send the .ipynb to whoever must approve: when they open it
and run it, the run comes back from the checkpoint without calling any model, and its form
appears again. No kernel at hand? `mkl resume` does it from a terminal.

`data/shared-approval.ipynb` is such a notebook: Alice ran the refund machine there, and the
run is waiting for approval.
"""),
    code("%load_ext mkl_notebook\nimport mkl_notebook"),
    code("""import json
import pathlib
import re
import shlex
import sys

# The `mkl` command of this kernel's environment, whether or not that environment is activated.
mkl = f"{shlex.quote(sys.executable)} -m mkl_notebook.cli"


def for_a_person(lines):
    \"\"\"What an `mkl` command printed for a person: all but its last line, the JSON status for programs. The
    commands it prints name this environment's `mkl` by its path when the environment is not activated; said
    here as `mkl`, as in an activated one, so the page reads the same wherever the project lives.\"\"\"
    here = shlex.quote(str(pathlib.Path(sys.executable).parent / "mkl"))
    return "\\n".join(lines[:-1]).replace(here + " ", "mkl ")


def without_times(text):
    \"\"\"``text`` without the times answers were given (`mkl` prints them): this page answers a fresh copy of
    the file each time it runs, and reads the same every time.\"\"\"
    return re.sub(r"( at| ·) \\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d UTC", "", text)"""),
    md("## What does the shared notebook carry?"),
    checked("""listing = !cd data && {mkl} runs shared-approval.ipynb
print(for_a_person(listing))"""),
    md("""
## Who made it?

Every checkpoint's digest says it is *intact*; anyone could recompute that, so it cannot say
*who* made it. Each person's checkpoints are also sealed with their own key (made on first use,
kept in their Jupyter data folder), and a checkpoint is *trusted* only when it is sealed by you
or by a key you added with `mkl trust`. Alice's key is unknown here, so the listing marks her
run **NOT TRUSTED** in front of its question: the text may not be what the machine's author
wrote, and nothing of the run is taken up until you choose to.

Before approving anything in it, ask Alice for her key's fingerprint (`mkl trust` prints it)
and compare. Then either take up this one file's run (`trust_file=True` here, `--trust-file`
at the command line), or trust her key for good: `mkl trust data/shared-approval.ipynb --name Alice`.

## Rehydrate it in this kernel

`get_run` finds the run in the notebook file, verifies its checkpoint and replays it:
zero model calls, and the same pending question.
"""),
    checked(
        """run = mkl_notebook.get_run(
    "shared-refund",
    notebook="data/shared-approval.ipynb",
    script="data/refund.script.yaml",
    trust_file=True,  # compared the fingerprint with Alice's: take up her run
)
print(run.status, "at", run.at, "-", run.pending["ask"])
print(run.calls)"""
    ),
    md("Answering it here continues the run (the script supplies the model's next answers):"),
    checked(
        """run.submit("approve")
run.submit("approve")
print(run.status, "-", run.result)"""
    ),
    md("""
## Headless: `mkl resume` on the file

The same works without a kernel. `mkl resume` reads the checkpoint from the notebook, applies
the reply, and writes the updated checkpoint back into the file (other cells untouched), sealed
with your key. `--trust-file` is the same choice as above: take up Alice's run though her key
is not one you trust; without it, the command refuses and names her key.
"""),
    code("""import shutil
import tempfile

work = pathlib.Path(tempfile.mkdtemp())
copy = work / "shared.ipynb"
shutil.copy("data/shared-approval.ipynb", copy)
script = pathlib.Path("data/refund.script.yaml").resolve()"""),
    md("""
A reply names the question it answers: `mkl runs` prints each waiting question's id and the
command to answer it, and a reply to any other question is refused. The last line of every
`mkl` command is a JSON status for programs; here it gives the id.
"""),
    checked(
        """listing = !cd {work} && {mkl} runs shared.ipynb
print(for_a_person(listing))
first = json.loads(listing[-1])["runs"][0]["question_id"]
resume = f"cd {work} && {mkl} resume shared.ipynb --run shared-refund --script {script} --trust-file --quiet"
"""
    ),
    md("The first approval: the run goes on to its second question, whose id the status line gives."),
    checked(
        """status = !{resume} --question {first} --set refund_approval=approve
line = json.loads(status[-1])
print(line["status"], "at", line["at"], "-", line["ask"], "-", line["question_id"])
second = line["question_id"]"""
    ),
    md("The same command again is refused: that question is answered, and nothing is recorded."),
    code("""refused = !{resume} --question {first} --set refund_approval=approve
print(without_times(for_a_person(refused)))"""),
    md("""
The second approval finishes it; the notebook file now carries the finished run, with who answered
each question and how that is known (`mkl runs` prints when, too; left out here, so that this page
reads the same every time it runs):
"""),
    checked(
        """done = !{resume} --question {second} --reply approve
print(json.loads(done[-1])["status"], "-", json.loads(done[-1])["result"])"""
    ),
    code("""listing = !{mkl} runs {copy}
print(without_times(for_a_person(listing)))"""),
]

DIAGNOSTICS = [
    md("""
# Diagnostics: loops, ceilings and budgets

Loops are normal in mkl machines (a draft goes back for another pass), so every run is bounded:
`budget:` caps the steps, `max_visits:` caps how often one state may be entered, and a token
budget caps the cost. This notebook makes a loop that never converges and watches each guard.
"""),
    code("%load_ext mkl_notebook\nimport mkl_notebook"),
    machine_cell("loop"),
    md("""
## A state's ceiling

`write` may be entered at most 4 times. The judge (scripted) never accepts the text, so the
fifth entry halts the run with `loop-ceiling`, naming the state. The visits table shows each
state's entries against its `max_visits`.
"""),
    code('%mkl run polish --id ceiling --set product="a kettle" --script data/loop.script.yaml'),
    checked(
        """run = mkl_notebook.get_run("ceiling")
print(run.status, run.error, "at", run.at)
print(run.visits)"""
    ),
    md("""
## Out of budget

With a smaller step budget the run halts `budget-exhausted` first. The result names the most
visited state — the question an author asks first — and the visits table highlights it.
"""),
    code('%mkl run polish --id budget --max-steps 5 --set product="a kettle" --script data/loop.script.yaml'),
    code("%mkl visits budget"),
    md("""
## Suspend instead of dying

With `--suspend` an exhausted budget suspends the run. Resuming with a larger budget continues
exactly where it stopped (the journal replays the first steps for free); resuming with the same
budget would suspend again at the same place.
"""),
    code(
        '%mkl run polish --id patient --suspend --max-steps 3 --set product="a kettle" --script data/loop.script.yaml'
    ),
    checked(
        """run = mkl_notebook.get_run("patient")
print(run.status, run.error, "at", run.at)"""
    ),
    code("%mkl resume patient --max-steps 50"),
    checked("""print(run.status, run.error, "at", run.at, "after", len(run.trace), "steps")"""),
]

TESTING = [
    md("""
# Testing machines without an API key

A machine's behaviour under given model answers is fixed by the language, so it can be tested
like code. A *scenario file* lists runs with scripted answers and what each must do
(`data/refund.test.yaml`). `%mkl test` runs them and shows a pass/fail table; `mkl test` does
the same from a terminal or CI.
"""),
    code("%load_ext mkl_notebook\nimport mkl_notebook"),
    machine_cell("refund"),
    code("%mkl test refund --script data/refund.test.yaml"),
    md("The same scenarios from the command line (the exit code is 0 only when all pass):"),
    code("""import shlex
import sys

# The `mkl` command of this kernel's environment, whether or not that environment is activated.
mkl = f"{shlex.quote(sys.executable)} -m mkl_notebook.cli"
"""),
    checked("!{mkl} test data/refund.mkl --script data/refund.test.yaml"),
    md("""
`%mkl check NAME` (or `mkl check FILE`) reports static findings: unreachable states, no path to
`END`, a budget below the shortest path, a `max_visits` that a repair loop is bound to hit.
"""),
    checked("%mkl check refund"),
    md("""
## Freeze a run into a test

A run that did what you wanted is a test waiting to be written. `%mkl freeze RUN -o FILE` (or
`mkl test freeze RUN -o FILE` in a terminal) writes it as a scenario file: every answer the run was given
(the model's, the tools', the hooks', and people's replies with their notes), each beside what it answered,
and the route and result they gave. This run is approved twice, the first time with a note:
"""),
    code('%mkl run refund --id kept --set ticket="Parcel A-1001 arrived broken" --script data/refund.script.yaml'),
    checked(
        """kept = mkl_notebook.get_run("kept")
kept.submit("approve", note="receipt checked")
kept.submit("approve")
print(kept.status, "-", kept.result)"""
    ),
    checked("%mkl freeze kept -o kept.test.yaml --force"),
    md("""
The file is plain block YAML, meant to be read and diffed; its header says how to test it. Here are its
first answers:
"""),
    checked(
        """with open("kept.test.yaml", encoding="utf-8") as frozen:
    print("".join(frozen.readlines()[:24]))"""
    ),
    md("""
Testing it replays the run with no model. After an edit, the test fails at the first request that
changed, naming its state and what changed (here one word of `draft`'s prompt):
"""),
    checked("!{mkl} test data/refund.mkl --script kept.test.yaml"),
    checked(
        """with open("data/refund.mkl", encoding="utf-8") as machine:
    edited = machine.read().replace("Draft a reply", "Write a reply")
with open("refund-edited.mkl", "w", encoding="utf-8") as machine:
    machine.write(edited)"""
    ),
    checked("!{mkl} test refund-edited.mkl --script kept.test.yaml"),
    md("""
## The standard library

Ten tested machines ship with mkl_notebook, and any machine can call one by name
(`call: std_refine`) with no file beside it; a machine of the same name that you define
shadows the library's. Each reads `task` and returns `answer`:
"""),
    code("%mkl stdlib"),
    md("Each one with its diagram and source, here the draft, review and revise loop:"),
    code("%mkl stdlib std_refine"),
    md("""
Calling one is one state. Its scenarios (here: the reviewer accepts the first draft) are
scripted like any other:
"""),
    code("""%%mkl
mklang: "0.4"
machine: polish
entry: refine
budget: 3
result: answer
states:
  refine:
    call: std_refine
    input: {task: "Write a one-line apology for a late parcel.", criteria: "short and sincere"}
    output: answer
    gates: [{when: otherwise, then: ok, to: END}]"""),
    code("%mkl run polish --no-hitl --script data/polish.script.yaml"),
    checked('run = mkl_notebook.get_run("polish")\nprint(run.status, "-", run.result)'),
]

REAL_MODELS = [
    md("""
# Real models

mkl machines name capability *tiers* (`fast`, `balanced`, `reasoning`), never models. You map
tiers to models, and runs go through [litellm](https://docs.litellm.ai/) to hosted providers
(OpenAI, Anthropic, Gemini, …) or local servers (Ollama, vLLM, any OpenAI-compatible server).

Configure it in any of these places (later wins):

* `pyproject.toml` or a `mkl.toml` next to the notebook:

  ```toml
  [tool.mkl]            # in mkl.toml: top level
  balanced = "openai/gpt-4o-mini"
  fast = "ollama/llama3.2"
  ```
* the environment: `MKL_MODEL` (every tier), `MKL_MODEL_FAST`, `MKL_JUDGE_MODEL`, `MKL_API_BASE`;
* in the notebook: `%mkl config model=openai/gpt-4o-mini` or `%config MklMagics.model = "…"`;
* per run: `%mkl run NAME --model ollama/llama3.2`.

API keys come only from the provider's usual variables (`OPENAI_API_KEY`, …) and never reach
journals, checkpoints or outputs.
"""),
    code("%load_ext mkl_notebook\nimport mkl_notebook"),
    md("What is configured here?"),
    code("%mkl config"),
    machine_cell("triage"),
    md("""
With no model configured, a run says so in one line and points to the scripted provider:
"""),
    checked(
        """try:
    mkl_notebook.run("triage", id="real-model-demo", input={"ticket": "Where is my parcel?"})
except ValueError as problem:
    print(problem)"""
    ),
    md("""
With a model configured the same call runs for real, for example against a local Ollama:

```python
%mkl config model=ollama/llama3.2 api_base=http://localhost:11434
%mkl run triage --set ticket="Where is my parcel?"
```

`%mkl models` lists each tier's model and where that mapping came from (a config file, the
environment, this notebook's settings).

## Watching, timing and paying

A real model's answers stream into the run's live line as they are written. Every answer is
journaled with how long the call took and, when litellm's local price list knows the model,
what it cost: the trace shows both per step, the run view and `%mkl runs` show the total, and
`mkl run` puts it in its status line as `usage.cost_usd`. A model the list does not know (a
local one, say) shows no cost at all rather than a guess. To cap what a run may spend:

```python
%mkl run triage --set ticket="Where is my parcel?" --max-cost 0.05 --suspend
%mkl resume triage --max-cost 0.10   # a new limit; the run goes on where it stopped
```
"""),
    code("%mkl models"),
]

BATCHES = [
    md("""
# One machine over a data set

Workflows rarely run once: a support team drafts replies for every new ticket, and a person
approves the hard cases. `%mkl map` runs a machine once per row of a data set, a durable run per
row, with a progress bar, a table of results, and **one form** for every row's question.

The rows can be a list of dicts (as here), a pandas DataFrame, or a `.jsonl`, `.json` or `.csv`
file; `mkl map FILE.mkl --over ROWS.jsonl` does the same from a terminal.

The last part runs the calls on a Dask cluster, which the base install leaves out: install it
first with `pip install 'mkl-notebook[dask]'` (in a clone: `.venv/bin/pip install -e '.[dask]'`)
and restart the kernel. Everything above that part runs without it.
"""),
    code("%load_ext mkl_notebook"),
    machine_cell("refund"),
    code(
        """tickets = [
    {"id": "A-1001", "ticket": "Parcel A-1001 arrived broken"},
    {"id": "A-1002", "ticket": "Parcel A-1002 never arrived"},
    {"id": "A-1003", "ticket": "Parcel A-1003 was the wrong size"},
]"""
    ),
    md("""
## Run it over every row

`--key id` names each row's run after its `id` column (`refund-A-1001`, …), so running the cell
again replays every finished run for free; without a key the row's content names it. `--hitl`
makes each run stop at its approval gate, so the review queue below has a row per question: the
run, the question, the draft it is about, when it was asked, and **Approve** / **Reject** with a
note box. A row leaves the queue once answered (here, from a terminal, or from code), and the count
follows. Filter (run id, question or draft) and sort to narrow it; **Approve the N shown** approves
just the rows on the page shown, each with the same note. Each reply answers only its own row's
question and is journaled with who gave it and when; the table above redraws as the runs go on.
"""),
    code("batch = %mkl map refund --over $tickets --key id --script data/refund.script.yaml --hitl"),
    md("""
`batch.results`, `batch.counts` and `batch.frame()` (a pandas DataFrame) give the same table to
Python code, and `batch.waiting()` the runs that still wait, each a `Run` you can `submit` to.

## The same on a Dask cluster

When the calls are heavy (a local model, a parser, a GPU job), `--executor dask` makes each call
on the notebook's Dask cluster. Only the calls travel: each row's run and its journal stay in this
kernel. Here a small `LocalCluster` of process workers stands in for a real cluster (`pip install
'mkl-notebook[dask]'`), and the triage machine of notebook 01 sorts the same tickets, with scripted
answers that fit them (`data/sort.script.yaml`):
"""),
    machine_cell("triage"),
    code(
        """try:
    from distributed import Client, LocalCluster
except ImportError:  # Dask is an extra: say what to install, and stop nothing
    print("This part needs Dask: pip install 'mkl-notebook[dask]', then restart the kernel.")
    cluster = client = None
else:
    cluster = LocalCluster(n_workers=2, processes=True, dashboard_address=":0")  # any free port
    client = Client(cluster)"""
    ),
    code(
        """if client is not None:
    on_dask = %mkl map triage --over $tickets --key id --script data/sort.script.yaml --executor dask"""
    ),
    checked("if client is not None:\n    print(on_dask.counts)\n    print(on_dask.results[0])"),
    code("if client is not None:\n    client.close()\n    cluster.close()"),
]

SHARED_SOURCE = [
    code("%load_ext mkl_notebook"),
    machine_cell("refund"),
    code(
        '%mkl run refund --id shared-refund --set ticket="Parcel A-1001 arrived broken" '
        "--script refund.script.yaml --notebook shared-approval.ipynb"
    ),
]

NOTEBOOKS = {
    "01-quickstart": QUICKSTART,
    "02-human-approval": APPROVAL,
    "03-share-and-resume": SHARING,
    "04-diagnostics": DIAGNOSTICS,
    "05-testing-machines": TESTING,
    "06-real-models": REAL_MODELS,
    "07-batches": BATCHES,
}


def kernelspec() -> dict[str, str]:
    """The notebook metadata's kernelspec as JupyterLab writes it when it starts the ``python3`` kernel (from the
    installed kernel's spec, "Python 3 (ipykernel)"): anything else, it rewrites on open, marking it modified."""
    spec = KernelSpecManager().get_kernel_spec("python3")
    return {"display_name": spec.display_name, "language": spec.language, "name": "python3"}


def notebook(cells: list[nbformat.NotebookNode], name: str) -> nbformat.NotebookNode:
    """The tutorial ``name``, its cell ids derived from its name, so that a rebuild changes the file only
    where a cell or an output changed."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = kernelspec()
    nb.metadata["language_info"] = {"name": "python"}
    for index, cell in enumerate(cells):
        cell.id = hashlib.sha256(f"{name}/{index}".encode()).hexdigest()[:8]
    nb.cells = cells
    return nb


def execute(nb: nbformat.NotebookNode, path: Path) -> None:
    """Write ``nb`` to ``path`` and run it all there, as JupyterLab would, keeping its outputs to read but not
    its runs' checkpoints (:func:`without_runs`)."""
    nbformat.write(nb, path)
    nbformat.write(without_runs(run_all(path)), path)


def without_runs(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """``nb`` without the checkpoints of its runs (in outputs, or in its metadata), its views kept: the runs are
    signed by the key of whoever built the tutorials, which no reader knows, so a reader's Run All would meet
    them as a stranger's. Without them, it makes runs of the reader's own."""
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            for mime in RUN_CHECKPOINTS:
                output.get("data", {}).pop(mime, None)
    nb.metadata.pop("mkl", None)
    return nb


def main() -> None:
    for store in (HERE / ".mkl", HERE / "data" / ".mkl"):
        shutil.rmtree(store, ignore_errors=True)
    with tempfile.TemporaryDirectory() as alice:  # Alice's own Jupyter data folder, and so her own key
        nbformat.write(notebook(SHARED_SOURCE, "shared-approval"), HERE / "data" / "shared-approval.ipynb")
        run_all(HERE / "data" / "shared-approval.ipynb", env={"JUPYTER_DATA_DIR": alice, "JUPYTERHUB_USER": "alice"})
    shutil.rmtree(HERE / "data" / ".mkl", ignore_errors=True)  # the notebook alone carries that run
    for name, cells in NOTEBOOKS.items():
        execute(notebook(cells, name), HERE / f"{name}.ipynb")
        print(f"wrote {name}.ipynb", file=sys.stderr)
    shutil.rmtree(HERE / ".mkl", ignore_errors=True)


if __name__ == "__main__":
    main()
