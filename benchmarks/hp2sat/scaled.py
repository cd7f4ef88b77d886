#!/usr/bin/env python3
"""Larger instances of HP2SAT's model families, in the SPEC §7 form of models/.

Writes to OUT_DIR (default /tmp/hp2sat-scaled):
  steal_master_key_{100,200}.json      the attack tree of models/steal_master_key_50.json
                                       with 100 and 200 users (same equations)
  steal_master_key_{50,100}_ctx.json   the same with each context variable false with
                                       probability 0.15 (seeded)
  binary_tree_{12,13}.json             OR trees of depth 12 and 13 (8,191 and 16,383 nodes)
  binary_tree_11_andor_{3,4}.json      depth-11 trees whose nodes are AND or OR at random
                                       and whose leaves are false with probability 0.2

Time them with
  cargo run --release -p audita-causal --example hp2sat_rho OUT_DIR/*.json
"""
import json
import os
import random
import sys


def steal_master_key(n, rnd=None):
    v = {}

    def exo(name):
        value = True if rnd is None else rnd.random() >= 0.15
        v[name + "_Exo"] = {"candidate": False, "principal": None, "value": value}

    for i in range(1, n + 1):
        u = f"U{i}"
        for a in ["AD", "A", "FDB", "FF", "FN", "FS"]:
            exo(f"{a}_{u}")
            v[f"{a}_{u}"] = {"eq": f"{a}_{u}_Exo", "principal": f"{a}_{u}"}
        v[f"GK_{u}"] = {"eq": f"(FF_{u} | FDB_{u})", "principal": f"GK_{u}"}
        v[f"GP_{u}"] = {"eq": f"(FS_{u} | FN_{u})", "principal": f"GP_{u}"}
        v[f"KMS_{u}"] = {"eq": f"(A_{u} & AD_{u})", "principal": f"KMS_{u}"}
        dk = "".join(f" & !DK_U{j}" for j in range(i - 1, 0, -1))
        sd = "".join(f" & !SD_U{j}" for j in range(i - 1, 0, -1))
        v[f"DK_{u}"] = {"eq": f"(GP_{u} & GK_{u}{dk})", "principal": f"DK_{u}"}
        v[f"SD_{u}"] = {"eq": f"(KMS_{u}{sd})", "principal": f"SD_{u}"}
    v["DK"] = {"eq": "(" + " | ".join(f"DK_U{i}" for i in range(1, n + 1)) + ")", "principal": "DK"}
    v["SD"] = {"eq": "(" + " | ".join(f"SD_U{i}" for i in range(1, n + 1)) + ")", "principal": "SD"}
    v["SMK"] = {"eq": "(DK | SD)", "principal": "SMK"}
    return {"outcome": "SMK", "variables": v}


def binary_tree(depth, rnd=None):
    v = {}
    n = 2 ** (depth + 1) - 1
    for i in range(n):
        if 2 * i + 1 < n:
            op = "|" if rnd is None else rnd.choice(["|", "&"])
            v[f"n{i}"] = {"eq": f"(n{2 * i + 1} {op} n{2 * i + 2})", "principal": f"n{i}"}
        else:
            value = True if rnd is None else rnd.random() >= 0.2
            v[f"n{i}"] = {"eq": f"n{i}_exo", "principal": f"n{i}"}
            v[f"n{i}_exo"] = {"candidate": False, "principal": None, "value": value}
    return {"outcome": "n0", "variables": v}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "/tmp/hp2sat-scaled"
    os.makedirs(out, exist_ok=True)
    models = {
        "steal_master_key_100": steal_master_key(100),
        "steal_master_key_200": steal_master_key(200),
        "steal_master_key_50_ctx": steal_master_key(50, random.Random(1)),
        "steal_master_key_100_ctx": steal_master_key(100, random.Random(2)),
        "binary_tree_12": binary_tree(12),
        "binary_tree_13": binary_tree(13),
        "binary_tree_11_andor_3": binary_tree(11, random.Random(3)),
        "binary_tree_11_andor_4": binary_tree(11, random.Random(4)),
    }
    for name, model in models.items():
        with open(os.path.join(out, name + ".json"), "w") as f:
            json.dump(model, f, sort_keys=True)


if __name__ == "__main__":
    main()
