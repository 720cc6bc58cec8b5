"""The preset dictionary a checkpoint's journal is compressed with (encoding ``zlib+words1+base85``).

A notebook of many runs carries one journal per run, each a few kilobytes: too short for deflate to learn
the words every journal repeats (record keys, the options as written, mklang's keys as the machine's source
escapes them in JSON). Deflate may start from a preset dictionary instead (RFC 1950's FDICT); these are its
words, generic to every machine, nothing of any one machine's text. A journal of a few kilobytes compresses
about a third smaller with them.

Frozen: a checkpoint written with this dictionary is read with these exact bytes by every later release.
Better words go in a new dictionary under a new encoding name; this one stays, for the files that use it.
"""

from __future__ import annotations

# Least common first: deflate reaches the end of its window most cheaply.
_WORDS = (
    # mklang as a start record's machine source spells it, escaped as JSON
    "\\n    tools: [\\n    hooks:\\n    fan_out:\\n    machine_call:\\n    max_visits: "
    '\\n    system: \\"\\n    retries: \\n    tier: \\n    model: \\n    repair: \\n    output_schema:\\n'
    '\\n        escalate: true\\n        ask: \\"\\n        reply_to: \\n        then: ok\\n'
    "      - { when: otherwise, then: ok, to: END }\\n      - { when: otherwise, then: ok, to: "
    '\\n      - when: otherwise\\n      - when: \\n        to: \\n        hook: \\"\\n'
    '\\n    structure: \\n    prompt: \\"\\n    output: \\n    gates:\\n'
    '"source":"mklang: \\"0.4\\"\\nmachine: \\nentry: \\nbudget: \\nresult: \\ncontext:\\n  \\nstates:\\n  '
    # records, their keys in the order they are written, values left out
    '{"t":"rerun","time":'
    '{"action":"","pos":"","t":"resolve","time":'
    '{"t":"resume","time":'
    '{"fp":"","name":"","pos":"root/0:#1/tool@0","t":"intent"}'
    '{"answer":{"value":{}},"effect":"read","fp":"","kind":"tool","name":"","pos":"root/0:#1/tool@0","t":"answer"}'
    '{"new":"","old":"","pos":"","t":"invalidated"}'
    '"error":"budget","status":"halt","t":"finish","time":'
    '"error":null,"status":"done","t":"finish","time":'
    '{"at":null,"calls":{"made":1,"replayed":0},'
    '{"about":"","by":"","claimed":"","established":"jupyter-server","note":"","pos":"root/0:#1/reply@0",'
    '"question":"q-","reply_to":"","t":"reply","time":1796383509.9,"value":"approve","via":"form"}'
    '{"about":"","ask":"","at":"","calls":{"made":2,"replayed":0},"pinned":"","place":{"cell":"","request":""},'
    '"pos":"root/0:#1/reply@0","question":null,"reason":"escalated","reply_to":"","t":"suspend","time":'
    '{"context":{},"input":{},"machines":{"":{"sha256":"",'
    '"options":{"ask_human":false,"ask_limit":3,"cost_budget":null,"hitl":"asking","max_steps":null,'
    '"max_workers":32,"on_untrusted_flow":"report","retry_backoff":0.5,"suspendable":false,"tool_effects":{},'
    '"trusted_keys":[]},"origin":{"script":"","path":""},"package":"0.1.0","root":"","run":"","secret":"",'
    '"t":"start","time":1796383509.9,'
    '{"by":"root","key":"ed25519:","sig":"","t":"sign","time":1796383509.9'
    '{"answer":{"choice":0,"model":"scripted"},"fp":"","kind":"judge","pos":"root/0:#1/judge@0","t":"answer"},'
    '{"answer":{"model":"scripted","text":""},"fp":"","kind":"produce","pos":"root/0:#1/produce","t":"answer",'
    '"usage":[150,40]},'
)

WORDS = _WORDS.encode("utf-8")
"""The dictionary's bytes (RFC 1950 FDICT); never changed once released."""
