#!/usr/bin/env python3
"""Translates the HP2SAT benchmark models and queries into the SPEC §7 format.

Source: the public HP2SAT repository (Ibrahim, Rehwald, Pretschner: "Efficiently checking
actual causality with SAT solving", Dependable Software Systems Engineering 2019,
arXiv:1904.13101), MIT licence, github.com/amjadKhalifah/HP2SAT1.0 at commit 19ec60d.
Its models are Java code (src/main/java/.../util/ExampleProvider.java); the generators
below rebuild the same equations (variable for variable) in the SPEC §7 JSON format.
Its queries and expected answers come from its test suite
(src/test/java/.../causality/CausalitySolverInstanceTest.java), which this script parses
when given a checkout:

    python3 benchmarks/hp2sat/translate.py [HP2SAT_CHECKOUT]

writes benchmarks/hp2sat/models/*.json (always) and, with a checkout,
benchmarks/hp2sat/queries.json: one entry per single-cause test with its context, its
effect phi, the cause X and HP2SAT's expected AC1/AC2/AC3 and witness.

Mapping: HP2SAT's exogenous context variables `*_exo` become `value` variables with
`candidate: false` and principal null; every endogenous variable is a candidate owned
by a principal of its own name (so ρ per principal is ρ per variable); the outcome is
the effect phi. Binary-tree node names are numbers, which SPEC §7 identifiers cannot
be: node `17` becomes `n17` (and `17_exo` becomes `n17_exo`).
"""

import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def ident(name):
    return "n" + name if name[0].isdigit() else name


class M:
    """A model under construction: exogenous context variables and equations."""

    def __init__(self):
        self.exo = []
        self.eqs = {}

    def ex(self, name):
        self.exo.append(name)
        return name

    def eq(self, name, expr):
        self.eqs[name] = expr
        return name

    def json(self, outcome, context=None):
        context = context or {}
        v = {}
        for e in self.exo:
            v[ident(e)] = {"principal": None, "value": context.get(e, True), "candidate": False}
        for n, expr in self.eqs.items():
            v[ident(n)] = {"principal": ident(n), "eq": rename(expr)}
        return {"variables": v, "outcome": rename(outcome)}


def rename(expr):
    return re.sub(r"(?<![A-Za-z0-9_])(\d+(?:_exo)?)\b", lambda m: "n" + m.group(1), expr)


def AND(*xs):
    return "(" + " & ".join(xs) + ")"


def OR(*xs):
    return "(" + " | ".join(xs) + ")"


def NOT(x):
    return "!" + x if re.fullmatch(r"[A-Za-z0-9_]+", x) else "!(" + x + ")"


def billy_suzy():
    m = M()
    m.eq("BT", m.ex("BT_exo"))
    m.eq("ST", m.ex("ST_exo"))
    m.eq("SH", "ST")
    m.eq("BH", AND("BT", NOT("SH")))
    m.eq("BS", OR("SH", "BH"))
    return m


def billy_suzy_extended():
    m = M()
    m.eq("BT", m.ex("BT_exo"))
    m.eq("ST", m.ex("ST_exo"))
    m.ex("W_exo")
    m.eq("SH", AND("ST", NOT("W_exo")))
    m.eq("BH", AND("BT", NOT("SH"), NOT("W_exo")))
    m.eq("BS", OR("SH", "BH"))
    return m


def forest_fire(disjunctive):
    m = M()
    m.eq("L", m.ex("L_exo"))
    m.eq("MD", m.ex("MD_exo"))
    m.eq("FF", OR("L", "MD") if disjunctive else AND("L", "MD"))
    return m


def prisoners():
    m = M()
    for v in "ABC":
        m.eq(v, m.ex(v + "_exo"))
    m.eq("D", OR(AND("A", "B"), "C"))
    return m


def assassin(first):
    m = M()
    a = m.ex("A_exo")
    b = m.ex("B_exo")
    m.eq("B", b)
    m.eq("A", a if first else AND(a, "B"))
    m.eq("VS", OR(NOT("A"), "B"))
    return m


def railroad():
    m = M()
    for v in ["LB", "F", "RB"]:
        m.eq(v, m.ex(v + "_exo"))
    m.eq("A", NOT(OR(AND("F", "RB"), AND(NOT("F"), "LB"))))
    return m


def steal_master_key(users):
    """The attack tree of HP2SAT's `stealMasterKey(int users)` (the fixed 3-user model
    `stealMasterKey()` has the same equations for users = 3)."""
    m = M()
    dks, sds = [], []
    for i in range(1, users + 1):
        u = "_U%d" % i
        for s in ["FS", "FN", "FF", "FDB", "A", "AD"]:
            m.eq(s + u, m.ex(s + u + ("_exo" if users != 3 else "_Exo")))
        m.eq("GP" + u, OR("FS" + u, "FN" + u))
        m.eq("GK" + u, OR("FF" + u, "FDB" + u))
        m.eq("KMS" + u, AND("A" + u, "AD" + u))
        m.eq("DK" + u, AND("GP" + u, "GK" + u, *[NOT("DK_U%d" % k) for k in range(i - 1, 0, -1)]))
        m.eq("SD" + u, AND("KMS" + u, *[NOT("SD_U%d" % k) for k in range(i - 1, 0, -1)]))
        dks.append("DK" + u)
        sds.append("SD" + u)
    m.eq("DK", OR(*dks) if len(dks) > 1 else dks[0])
    m.eq("SD", OR(*sds) if len(sds) > 1 else sds[0])
    m.eq("SMK", OR("DK", "SD"))
    return m


def leakage(preemption):
    m = M()
    x = lambda i: "X%d" % i
    for i in range(1, 27):
        e = m.ex(x(i) + "_exo")
        if i < 26:
            m.eq(x(i), e)
        else:
            m.eq(x(i), AND(e, NOT("X39")) if preemption else e)
    m.eq("X27", OR("X3", "X4"))
    m.eq("X28", OR("X5", "X6"))
    m.eq("X29", OR("X7", "X8"))
    m.eq("X30", OR("X9", "X10"))
    m.eq("X31", OR("X12", "X13", "X14", "X15", "X16"))
    m.eq("X32", AND("X18", "X19"))
    m.eq("X33", AND("X20", "X21"))
    m.eq("X34", AND("X22", "X23"))
    m.eq("X35", AND("X24", "X25"))
    m.eq("X36", OR("X27", "X28", "X29", "X30"))
    m.eq("X37", AND("X31", "X17"))
    m.eq("X38", AND("X1", "X2", NOT("X39")) if preemption else AND("X1", "X2"))
    m.eq("X39", AND("X36", "X11"))
    inner = OR("X37", "X32", "X33", "X34", "X35")
    m.eq("X40", AND(inner, NOT("X39")) if preemption else inner)
    m.eq("X41", OR("X38", "X39", "X40", "X26"))
    return m


def dummy(m=None, a_source=None):
    m = m or M()
    m.eq("A", a_source or m.ex("A_exo"))
    m.eq("B", AND(m.ex("B_exo"), NOT("A")))
    m.eq("C", OR("A", "B"))
    m.eq("D", "A")
    m.eq("E", NOT("A"))
    m.eq("F", OR("C", "D", "E", "G", "H"))
    m.eq("G", NOT("C"))
    m.eq("H", AND(NOT("C"), NOT("G")))
    return m


def dummy2():
    m = M()
    for v in "ABCD":
        m.ex(v + "_exo")
    m.eq("B1", "B_exo")
    m.eq("A1", AND("A_exo", "B1"))
    m.eq("C1", AND("C_exo", NOT("B1")))
    m.eq("D1", AND("D_exo", "C1"))
    for v in "ABCD":
        m.eq(v + "2", v + "1")
    m.eq("X", OR(AND("A2", "B2"), AND("C2", "D2")))
    m.eq("Y", OR("B2", "C2"))
    return m


def dummy_xor(xnor):
    m = M()
    m.eq("A", m.ex("A_exo"))
    m.eq("B", m.ex("B_exo"))
    if xnor:
        m.eq("C", OR(AND("A", "B"), AND(NOT("A"), NOT("B"))))
    else:
        m.eq("C", AND(OR("A", "B"), NOT(AND("A", "B"))))
    return m


def benchmark_model():
    m = M()
    ors = {
        "A": "DE", "B": "EF", "C": "FG", "D": "HI", "E": "IJ", "F": "JK", "G": "KL",
        "H": "MN", "I": "NO", "J": "OP", "K": "PQ", "L": "QR", "M": "ST", "N": "TU",
        "O": "UV", "P": "VW", "Q": "WX", "R": "XY",
    }
    for v, (a, b) in ors.items():
        m.eq(v, OR(a, b))
    for v in "STUVWXY":
        m.eq(v, m.ex(v + "_exo"))
    return m


def binary_tree(depth, m=None):
    """HP2SAT's `generateBinaryTreeBenchmarkModel(depth)`: 2^(depth+1)-1 nodes numbered
    breadth-first from the root 0; leaf i reads its context variable i_exo, inner node
    k is the disjunction of its two children."""
    m = m or M()
    nodes = 2 ** (depth + 1) - 1
    leaves = (nodes + 1) // 2
    first_leaf = nodes - leaves
    for i in range(first_leaf, nodes):
        m.eq(str(i), m.ex("%d_exo" % i))
    for k in range(first_leaf - 1, -1, -1):
        m.eq(str(k), OR(str(2 * k + 1), str(2 * k + 2)))
    return m


def dummy_combined_with_binary_tree():
    m = M()
    binary_tree(11, m)
    return dummy(m, a_source="0")


# name -> (builder, effect)
MODELS = {
    "billy_suzy": (billy_suzy, "BS"),
    "billy_suzy_extended": (billy_suzy_extended, "BS"),
    "forest_fire_disjunctive": (lambda: forest_fire(True), "FF"),
    "forest_fire_conjunctive": (lambda: forest_fire(False), "FF"),
    "prisoners": (prisoners, "D"),
    "assassin_first": (lambda: assassin(True), "VS"),
    "assassin_second": (lambda: assassin(False), "VS"),
    "railroad": (railroad, "A"),
    "steal_master_key": (lambda: steal_master_key(3), "SMK"),
    "steal_master_key_8": (lambda: steal_master_key(8), "SMK"),
    "steal_master_key_20": (lambda: steal_master_key(20), "SMK"),
    "steal_master_key_50": (lambda: steal_master_key(50), "SMK"),
    "leakage": (lambda: leakage(False), "X41"),
    "leakage_preemption": (lambda: leakage(True), "X41"),
    "dummy": (lambda: dummy(), "F"),
    "dummy2": (dummy2, "X"),
    "dummy_xor": (lambda: dummy_xor(False), "C"),
    "dummy_xnor": (lambda: dummy_xor(True), "C"),
    "benchmark_model": (benchmark_model, "A"),
    "dummy_combined_with_binary_tree": (dummy_combined_with_binary_tree, "F"),
}
for d in range(1, 12):
    MODELS["binary_tree_%d" % d] = ((lambda d=d: lambda: binary_tree(d))(), "0")

# ExampleProvider call -> model name
CALLS = {
    "billySuzy()": "billy_suzy",
    "billySuzyExtended()": "billy_suzy_extended",
    "forestFire(true)": "forest_fire_disjunctive",
    "forestFire(false)": "forest_fire_conjunctive",
    "prisoners()": "prisoners",
    "assassin(true)": "assassin_first",
    "assassin(false)": "assassin_second",
    "railroad()": "railroad",
    "stealMasterKey()": "steal_master_key",
    "stealMasterKey(8)": "steal_master_key_8",
    "leakage(false)": "leakage",
    "leakage(true)": "leakage_preemption",
    "dummy()": "dummy",
    "dummy2()": "dummy2",
    "dummyXOR()": "dummy_xor",
    "dummyXNOR()": "dummy_xnor",
    "benchmarkModel()": "benchmark_model",
    "dummyCombinedWithBinaryTree()": "dummy_combined_with_binary_tree",
}
for d in range(1, 12):
    CALLS["generateBinaryTreeBenchmarkModel(%d)" % d] = "binary_tree_%d" % d


def java_formula(src):
    """A LogicNG formula built with `f.` calls -> SPEC §7 expression text."""
    src = src.strip()
    m = re.fullmatch(r'f\.variable\("([^"]+)"\)', src)
    if m:
        return ident(m.group(1))
    m = re.fullmatch(r'f\.literal\("([^"]+)",\s*(true|false)\)', src)
    if m:
        return ident(m.group(1)) if m.group(2) == "true" else "!" + ident(m.group(1))
    if src == "f.verum()":
        return "true"
    if src == "f.falsum()":
        return "false"
    m = re.fullmatch(r"f\.(and|or|not)\((.*)\)", src, re.S)
    if not m:
        raise ValueError("formula: " + src)
    args = split_args(m.group(2))
    parts = [java_formula(a) for a in args]
    if m.group(1) == "not":
        return "!(" + parts[0] + ")"
    return "(" + (" & " if m.group(1) == "and" else " | ").join(parts) + ")"


def split_args(s):
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        cur += ch
    if cur.strip():
        out.append(cur)
    return out


LIT = re.compile(r'f\.(?:variable\("([^"]+)"\)|literal\("([^"]+)",\s*(true|false)\))')


def literals(src):
    out = {}
    for m in LIT.finditer(src):
        if m.group(1):
            out[m.group(1)] = True
        else:
            out[m.group(2)] = m.group(3) == "true"
    return out


def context_of(body, exo):
    m = re.search(r"Set<Literal> context = (.*?);\n", body, re.S)
    if not m:
        return None
    src = m.group(1)
    if "getExogenousVariables()" not in src:
        return literals(src)
    if re.search(r"\.map\((\w) -> \(Literal\) \1\)", src):
        return {e: True for e in exo}
    m2 = re.search(r'contains\("([^"]+)"\) \? \w\.negate\(\) : \w', src)
    if m2:
        return {e: m2.group(1) not in e for e in exo}
    m3 = re.search(r"contextVars\.contains\(\w\.name\(\)\) \? \w : \w\.negate\(\)", src)
    if m3:
        cv = re.search(r"contextVars = (?:new HashSet<>\()?Arrays\.asList\((.*?)\)\)?;", body, re.S)
        names = re.findall(r'"([^"]+)"', cv.group(1)) if cv else []
        return {e: e in names for e in exo}
    return None


def queries(checkout):
    path = os.path.join(checkout, "src/test/java/de/tum/in/i4/hp2sat/causality/CausalitySolverInstanceTest.java")
    text = open(path).read()
    out, skipped = [], []
    for m in re.finditer(r"@Test\s*(@Ignore\s*)?public void (\w+)\(\) throws Exception \{(.*?)\n    \}\n", text, re.S):
        ignored, name, body = m.group(1) is not None, m.group(2), m.group(3)
        call = re.search(r"ExampleProvider\.(\w+\([^)]*\))", body)
        model = CALLS.get(call.group(1)) if call else None
        if model is None or "getAllCauses" in body or "testSets" in body:
            skipped.append(name)
            continue
        exo = MODELS[model][0]().exo
        ctx = context_of(body, exo)
        cause = re.search(r"Set<Literal> cause = (.*?);\n", body, re.S)
        phi = re.search(r"Formula phi = (.*?);\n", body, re.S)
        results = re.findall(r"new CausalitySolverResult\((true|false),\s*(true|false),\s*(true|false),\s*cause,\s*(null|new HashSet<>\(.*?\)\))\)", body, re.S)
        if ctx is None or not cause or not phi or not results:
            skipped.append(name)
            continue
        best = None
        for ac1, ac2, ac3, w in results:
            wl = None if w == "null" else literals(w)
            key = (ac1, ac2, ac3)
            if best is None or (wl is not None and best[3] is not None and len(wl) < len(best[3])):
                best = (key[0] == "true", key[1] == "true", key[2] == "true", wl)
        out.append({
            "test": name,
            "ignored_upstream": ignored,
            "model": model,
            "context": {ident(k): v for k, v in sorted(ctx.items())},
            "phi": java_formula(phi.group(1)),
            "cause": {ident(k): v for k, v in literals(cause.group(1)).items()},
            "expected": {
                "ac1": best[0], "ac2": best[1], "ac3": best[2],
                "witness": None if best[3] is None else {ident(k): v for k, v in sorted(best[3].items())},
            },
        })
    return out, skipped


def main():
    models_dir = os.path.join(HERE, "models")
    os.makedirs(models_dir, exist_ok=True)
    for name, (build, effect) in MODELS.items():
        with open(os.path.join(models_dir, name + ".json"), "w") as f:
            json.dump(build().json(effect), f, indent=None, sort_keys=True)
            f.write("\n")
    if len(sys.argv) > 1:
        qs, skipped = queries(sys.argv[1])
        with open(os.path.join(HERE, "queries.json"), "w") as f:
            json.dump({"source": "HP2SAT1.0 @ 19ec60d, CausalitySolverInstanceTest.java",
                       "skipped_tests": len(skipped), "queries": qs}, f, indent=1, sort_keys=True)
            f.write("\n")
        print("%d queries, %d tests skipped (cause listing or unsupported context)" % (len(qs), len(skipped)))


if __name__ == "__main__":
    main()
