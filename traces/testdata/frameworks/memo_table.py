#!/usr/bin/env python3
"""The witness on every committed dump of the causal-witness memo's cases, one table
(BENCHMARKS.md, "The memo's cases on real frameworks"):

    python3 traces/testdata/frameworks/memo_table.py path/to/audita

Each cell is `audita trace witness` on `<stack>-<case>.json` (with its `.logs.json`
when the stack wrote one) for the action and injection `ids.jsonl` names: the level,
`·reach` when the walk reached the injection, `·note` when it said the injection is
not an ancestor, and the rules of the offending edges and the boundary codes.
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = ["injected", "clean", "compact_tail", "compact_drop", "compact_logged",
         "compact_logged_wrapped", "memory_exact", "memory_paraphrase"]
STACKS = ["pydanticai", "langgraph_openinference", "openai_agents_openinference_chatcmpl",
          "openai_agents_openinference"]


def cell(audita, d):
    base = os.path.join(HERE, d["stack"] + "-" + d["case"])
    data = open(base + ".json").read()
    if os.path.exists(base + ".logs.json"):
        data += "\n" + open(base + ".logs.json").read()
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        f.write(data)
    out = subprocess.run([audita, "trace", "witness", f.name, "--action", d["action"],
                          "--injection", d["injection"]], capture_output=True, text=True)
    os.unlink(f.name)
    w = json.loads(out.stdout)
    text = w["level"] + (" ·reach" if w["reaches_injection"] else "") + (" ·note" if "note" in w else "")
    why = sorted({e["rule"] for e in w["offending_edges"]} | {b["code"] for b in w["boundary"]})
    return text + (" (" + ", ".join(why) + ")" if why else "")


def main():
    audita = sys.argv[1] if len(sys.argv) > 1 else "audita"
    rows = {}
    for line in open(os.path.join(HERE, "ids.jsonl")):
        d = json.loads(line)
        if d["stack"] in STACKS and d["case"] in CASES:
            rows.setdefault(d["case"], {})[d["stack"]] = cell(audita, d)
    print("| case | " + " | ".join(STACKS) + " |")
    print("|---" * (len(STACKS) + 1) + "|")
    for c in CASES:
        if c in rows:
            print("| " + c + " | " + " | ".join(rows[c].get(s, "—") for s in STACKS) + " |")


main()
