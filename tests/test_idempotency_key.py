"""A non-idempotent tool call carries one idempotency key, the same on every copy and every retry of that call.

Alice and Bob each hold a copy of a run waiting for approval before a payment. Offline, each approves their own
copy; both copies call the payment tool. The tool forwards the key mkl gives it to a payment service that
deduplicates by it (as payment APIs do with an idempotency header), so the customer is paid once. When the
copies meet again, the fork is shown, not merged silently. Real components: the ``mkl`` command in
subprocesses, two people as two Jupyter data folders (two keys), two SQLite stores, a checkpoint file.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from support import mkl_cli

PAY = """\
machine: pay
entry: quote
budget: 6
states:
  quote:
    structure: a line
    prompt: "Say the refund is ready."
    output: note
    gates:
      - { when: otherwise, escalate: true, to: pay, ask: "Pay the refund of 100?", reply_to: approval }
  pay:
    tool: charge
    idempotent: false
    input: { amount: 100, customer: "C-7" }
    output: receipt
    on_error:
      - { match: "busy", retry: 2 }
    gates:
      - { when: otherwise, then: ok, to: END }
"""
# The payment service: it charges once per idempotency key and answers a repeat with the first receipt. The
# first call it ever sees fails after being logged ("busy"), so a retry of the same call is seen too.
SERVICE = """import json
import os
from pathlib import Path

import mkl_notebook


@mkl_notebook.tool
def charge(amount, customer, idempotency_key):
    service = Path(os.environ["SERVICE"])
    with open(service / "calls.log", "a", encoding="utf-8") as log:
        log.write(idempotency_key + "\\n")
    if not (service / "warmed").exists():
        (service / "warmed").write_text("", encoding="utf-8")
        raise RuntimeError("busy")
    charges = service / "charges.json"
    done = json.loads(charges.read_text(encoding="utf-8")) if charges.exists() else {}
    if idempotency_key not in done:
        done[idempotency_key] = {"amount": amount, "customer": customer, "receipt": f"R{len(done) + 1}"}
        charges.write_text(json.dumps(done), encoding="utf-8")
    return done[idempotency_key]["receipt"]
"""


def test_two_copies_that_part_offline_pay_once_where_the_service_deduplicates(tmp_path: Path) -> None:
    service = tmp_path / "service"
    service.mkdir()
    people = {}
    for name in ("alice", "bob"):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "pay.mkl").write_text(PAY, encoding="utf-8")
        (folder / "service.py").write_text(SERVICE, encoding="utf-8")
        (folder / "pay.script.yaml").write_text("llm:\n  produce: {refund: 'ready'}\n", encoding="utf-8")
        people[name] = (folder, {"JUPYTER_DATA_DIR": str(tmp_path / f"{name}-jupyter"), "SERVICE": str(service)})
    (alice, alice_env), (bob, bob_env) = people["alice"], people["bob"]
    tools = ("--script", "pay.script.yaml", "--tools", "service.py")

    code, asked, out, err = mkl_cli(
        alice, "run", "pay.mkl", "--id", "p", "--hitl", *tools, "--checkpoint", "cp.json", env=alice_env
    )
    assert code == 3, out + err
    shutil.copy(alice / "cp.json", bob / "cp.json")  # Bob receives the waiting run

    approve = ("--question", asked["question_id"], "--set", "approval=approve", *tools)
    code, paid_by_alice, out, err = mkl_cli(alice, "resume", "cp.json", *approve, env=alice_env)
    assert code == 0, out + err
    code, paid_by_bob, out, err = mkl_cli(bob, "resume", "cp.json", "--trust-file", *approve, env=bob_env)
    assert code == 0, out + err

    keys = (service / "calls.log").read_text(encoding="utf-8").split()
    assert len(keys) == 3  # Alice's first attempt (busy), her retry, and Bob's copy's call
    assert len(set(keys)) == 1 and keys[0].startswith("mkl-")  # one call, one key, wherever it was made
    charges = json.loads((service / "charges.json").read_text(encoding="utf-8"))
    assert [charge["amount"] for charge in charges.values()] == [100]  # the customer is paid once
    assert paid_by_alice["result"] == paid_by_bob["result"] == "R1"

    # The copies meet: Alice takes up Bob's copy. Each approved on their own, so the histories part there: both
    # are kept and the fork is said, not merged.
    code, _, out, err = mkl_cli(alice, "resume", str(bob / "cp.json"), "--trust-file", *tools, env=alice_env)
    assert code == 2 and err.count("\n") == 1, out + err
    assert "part" in err and "p:" in err, err


def test_a_different_call_or_amount_gets_a_different_key(tmp_path: Path) -> None:
    from mkl_notebook.engine.tools import idempotency_key

    secret = bytes(16)
    one = idempotency_key(secret, "root/2:pay#1/tool", '{"amount": 100}')
    assert one == idempotency_key(secret, "root/2:pay#1/tool", '{"amount": 100}')
    assert one != idempotency_key(secret, "root/2:pay#1/tool", '{"amount": 100000}')
    assert one != idempotency_key(secret, "root/4:pay#2/tool", '{"amount": 100}')
    assert one != idempotency_key(bytes([1]) * 16, "root/2:pay#1/tool", '{"amount": 100}')  # another run
