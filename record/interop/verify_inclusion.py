#!/usr/bin/env python3
"""Verifies `audita proof inclusion --json` output with the Python standard library
alone (hashlib, base64, json): an independent check of Audita's inclusion proofs.

Usage: verify_inclusion.py PROOF.json [...]

For each file: the leaf's RFC 6962 hash SHA-256(0x00 || leaf) equals `leaf_hash`;
the leaf ends with the message id's digest and starts with its author (the leaf is
`len(author) || author || digest`); the audit path, folded per RFC 9162 §2.1.3.2,
gives `root`; and the checkpoint note's body (origin, size, base64 root) states the
same size and root. Signatures are not checked here (no Ed25519 in the standard
library): the Go interop program checks them.

Exit 0 when every proof verifies, 1 (with one line per failure) otherwise.
"""

import base64
import hashlib
import json
import sys


def leaf_hash(leaf: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + leaf).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def root_from_inclusion(index: int, size: int, leaf: bytes, path: list) -> bytes:
    """RFC 9162 §2.1.3.2: the root an inclusion proof implies, or ValueError."""
    if index >= size:
        raise ValueError(f"index {index} is not below the tree size {size}")
    fn, sn = index, size - 1
    r = leaf
    for p in path:
        if sn == 0:
            raise ValueError("proof is too long")
        if fn & 1 == 1 or fn == sn:
            r = node_hash(p, r)
            if fn & 1 == 0:
                while fn & 1 == 0 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ValueError("proof is too short")
    return r


def b64(text: str) -> bytes:
    return base64.b64decode(text, validate=True)


def check(doc: dict) -> None:
    if doc.get("schema") != "audita.proof.inclusion/v1":
        raise ValueError(f"unknown schema {doc.get('schema')!r}")
    leaf = b64(doc["leaf"])
    lh = leaf_hash(leaf)
    if lh != b64(doc["leaf_hash"]):
        raise ValueError("leaf_hash is not SHA-256(0x00 || leaf)")
    digest = bytes.fromhex(doc["digest"])
    author = doc["author"].encode()
    if leaf[-32:] != digest or leaf[1 : 1 + len(author)] != author or leaf[0] != len(author):
        raise ValueError("the leaf is not the message id (author, digest)")
    path = [b64(h) for h in doc["proof"]]
    if any(len(h) != 32 for h in path):
        raise ValueError("a proof hash is not 32 bytes")
    root = root_from_inclusion(int(doc["index"]), int(doc["tree_size"]), lh, path)
    if root != b64(doc["root"]):
        raise ValueError("the audit path does not lead to the root")
    body = doc["checkpoint"].split("\n\n", 1)[0].split("\n")
    if len(body) < 3:
        raise ValueError("checkpoint note has no origin, size and root")
    if int(body[1]) != int(doc["tree_size"]) or b64(body[2]) != root:
        raise ValueError("the checkpoint states another size or root")


def main(argv: list) -> int:
    if len(argv) < 2:
        print("usage: verify_inclusion.py PROOF.json [...]", file=sys.stderr)
        return 2
    failed = 0
    for name in argv[1:]:
        try:
            with open(name, encoding="utf-8") as f:
                check(json.load(f))
            print(f"{name}: inclusion verified")
        except (ValueError, KeyError, TypeError, json.JSONDecodeError) as e:
            print(f"{name}: FAIL: {e}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
