"""An independent implementation of the Audita evidence wire format v1
(evidence/FORMAT.md), written from that document alone: Python standard library
plus `cryptography` for Ed25519. Shares no code with the Rust crate.

    python3 envelope_v1.py VECTORS_JSON

Decodes every envelope and the receipt of the committed test vectors into plain
values, re-encodes them (must give the same bytes), checks the canonical-form rules,
recomputes message ids and Merkle leaves, verifies every signature over the DSSE PAE
with the signer's public key, and signs again with the vector's secret (Ed25519 is
deterministic: same signature). Prints one JSON line; exits non-zero on any mismatch.
"""

import hashlib
import json
import re
import sys

from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

ENVELOPE_TYPE = "application/vnd.audita.envelope.v1"
RECEIPT_TYPE = "application/vnd.audita.receipt.v1"
NAME = re.compile(rb"^[A-Za-z0-9._:/-]{1,64}$")


class Bad(Exception):
    pass


class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def u8(self):
        if self.pos >= len(self.data):
            raise Bad("truncated")
        b = self.data[self.pos]
        self.pos += 1
        return b

    def varint(self):
        value, shift, start = 0, 0, self.pos
        while True:
            b = self.u8()
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
            if shift > 63:
                raise Bad("varint too long")
        if value >= 1 << 64:
            raise Bad("varint above 2^64-1")
        if self.pos - start > 1 and self.data[self.pos - 1] == 0:
            raise Bad("non-minimal varint")
        return value

    def zigzag(self):
        v = self.varint()
        return (v >> 1) ^ -(v & 1)

    def raw(self, n):
        if self.pos + n > len(self.data):
            raise Bad("truncated")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def str(self):
        return self.raw(self.varint()).decode("utf-8")

    def name(self):
        n = self.raw(self.varint())
        if not NAME.match(n):
            raise Bad("bad name %r" % n)
        return n.decode()

    def end(self):
        if self.pos != len(self.data):
            raise Bad("trailing bytes")


class Writer:
    def __init__(self):
        self.buf = bytearray()

    def u8(self, b):
        self.buf.append(b)

    def varint(self, v):
        while True:
            b = v & 0x7F
            v >>= 7
            if v:
                self.buf.append(b | 0x80)
            else:
                self.buf.append(b)
                return

    def zigzag(self, v):
        self.varint(((v << 1) ^ (v >> 63)) & ((1 << 64) - 1))

    def raw(self, b):
        self.buf += b

    def str(self, s):
        b = s.encode("utf-8")
        self.varint(len(b))
        self.buf += b


# Field layouts of payload and effect tags (FORMAT.md tables).
PAYLOADS = {
    1: ("move_to", [("target", "name"), ("x_mm", "zigzag"), ("y_mm", "zigzag")]),
    2: ("set_speed", [("target", "name"), ("mm_per_s", "varint")]),
    3: ("halt", [("target", "name")]),
    4: ("set_param", [("target", "name"), ("param", "str"), ("value", "zigzag")]),
    5: ("agent_text", [("text", "str")]),
    6: ("tool_output", [("tool", "str"), ("output", "str")]),
    7: ("sensor_report", [("sensor", "str"), ("reading", "str")]),
    8: ("external_input", [("source", "str"), ("text", "str")]),
    9: ("stored", [("stored_kind", "u8"), ("digest", "digest"), ("len", "varint")]),
}
EFFECTS = {
    0: ("none", []),
    1: ("at_position", [("target", "name"), ("x_mm", "zigzag"), ("y_mm", "zigzag"), ("tolerance_mm", "varint")]),
    2: ("speed", [("target", "name"), ("mm_per_s", "varint")]),
    3: ("halted", [("target", "name")]),
    4: ("param", [("target", "name"), ("param", "str"), ("value", "zigzag")]),
    5: ("claim", [("text", "str")]),
}
ROOT_KINDS = {"sensor_report", "external_input"}


def read_field(r, kind):
    return r.raw(32) if kind == "digest" else getattr(r, kind)()


def write_field(w, kind, value):
    if kind == "digest":
        w.raw(value)
    elif kind == "name":
        w.str(value)
    else:
        getattr(w, kind)(value)


def read_tagged(r, table, what):
    tag = r.u8()
    if tag not in table:
        raise Bad("unknown %s tag %d" % (what, tag))
    kind, fields = table[tag]
    return dict([("tag", tag), ("kind", kind)] + [(f, read_field(r, k)) for f, k in fields])


def write_tagged(w, table, value):
    w.u8(value["tag"])
    for f, k in table[value["tag"]][1]:
        write_field(w, k, value[f])


def decode_envelope(signed):
    if len(signed) < 65:
        raise Bad("too short")
    body, sig = signed[:-64], signed[-64:]
    r = Reader(body)
    if r.u8() != 1:
        raise Bad("version")
    env = {"author": r.name(), "destination": r.name(), "timestamp": r.varint()}
    env["payload"] = read_tagged(r, PAYLOADS, "payload")
    cites = []
    for _ in range(r.varint()):
        c = (r.name().encode(), r.raw(32))
        if cites and c <= cites[-1]:
            raise Bad("citations not strictly increasing")
        cites.append(c)
    env["citations"] = cites
    env["effect"] = read_tagged(r, EFFECTS, "effect")
    flags = r.u8()
    if flags & ~0x0F:
        raise Bad("unknown pin flags")
    pins = {"flags": flags}
    if flags & 1:
        pins["model_id"] = r.str()
    if flags & 2:
        pins["model_hash"] = r.raw(32)
    if flags & 4:
        pins["seed"] = r.varint()
    if flags & 8:
        n = r.varint()
        if n == 0:
            raise Bad("empty tool list")
        pins["tools"] = [(r.str(), r.str()) for _ in range(n)]
    env["pins"] = pins
    r.end()
    p = env["payload"]
    if p["kind"] == "stored" and p["stored_kind"] not in (1, 2, 3, 4):
        raise Bad("unknown stored kind")
    root = p["kind"] in ROOT_KINDS or (p["kind"] == "stored" and p["stored_kind"] in (3, 4))
    if not root and not cites:
        raise Bad("uncited derived command")
    return env, body, sig


def encode_envelope(env):
    w = Writer()
    w.u8(1)
    w.str(env["author"])
    w.str(env["destination"])
    w.varint(env["timestamp"])
    write_tagged(w, PAYLOADS, env["payload"])
    w.varint(len(env["citations"]))
    for author, digest in sorted(env["citations"]):
        w.str(author.decode())
        w.raw(digest)
    write_tagged(w, EFFECTS, env["effect"])
    p = env["pins"]
    w.u8(p["flags"])
    if "model_id" in p:
        w.str(p["model_id"])
    if "model_hash" in p:
        w.raw(p["model_hash"])
    if "seed" in p:
        w.varint(p["seed"])
    if "tools" in p:
        w.varint(len(p["tools"]))
        for name, version in p["tools"]:
            w.str(name)
            w.str(version)
    return bytes(w.buf)


def decode_receipt(signed):
    body, sig = signed[:-64], signed[-64:]
    r = Reader(body)
    if r.u8() != 1:
        raise Bad("version")
    rec = {"message_author": r.name(), "message_digest": r.raw(32), "recipient": r.name(), "timestamp": r.varint()}
    r.end()
    return rec, body, sig


def encode_receipt(rec):
    w = Writer()
    w.u8(1)
    w.str(rec["message_author"])
    w.raw(rec["message_digest"])
    w.str(rec["recipient"])
    w.varint(rec["timestamp"])
    return bytes(w.buf)


def pae(ptype, body):
    t = ptype.encode()
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(body), body)


def leaf(author, digest):
    w = Writer()
    w.str(author)
    w.raw(digest)
    return bytes(w.buf)


def main(path):
    v = json.load(open(path))
    keys = {k["name"]: k for k in v["keys"]}
    checked = 0

    def verify_and_resign(name, ptype, body, sig):
        k = keys[name]
        Ed25519PublicKey.from_public_bytes(bytes.fromhex(k["public"])).verify(sig, pae(ptype, body))
        again = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(k["secret"])).sign(pae(ptype, body))
        assert again == sig, "re-signing gave another signature"

    for e in v["envelopes"]:
        signed = bytes.fromhex(e["signed"])
        env, body, sig = decode_envelope(signed)
        assert env["author"] == e["author"] and env["payload"]["kind"] == e["kind"], e
        assert encode_envelope(env) == body, "re-encoding differs for %s" % e["kind"]
        verify_and_resign(env["author"], ENVELOPE_TYPE, body, sig)
        digest = hashlib.sha256(signed).digest()
        assert digest.hex() == e["id_digest"]
        assert leaf(env["author"], digest).hex() == e["leaf"]
        assert hashlib.sha256(b"\x00" + leaf(env["author"], digest)).hexdigest() == e["leaf_hash"]
        # The type separates domains: the same signature is no receipt's.
        try:
            Ed25519PublicKey.from_public_bytes(bytes.fromhex(keys[env["author"]]["public"])).verify(sig, pae(RECEIPT_TYPE, body))
            raise AssertionError("envelope signature verified as a receipt")
        except Exception as x:
            if isinstance(x, AssertionError):
                raise
        # Canonical form: a flipped byte anywhere is refused or changes the id.
        for i in range(len(body)):
            t = bytearray(signed)
            t[i] ^= 0x80
            try:
                env2, body2, _ = decode_envelope(bytes(t))
                assert encode_envelope(env2) == body2
            except (Bad, UnicodeDecodeError, KeyError):
                pass
        checked += 1

    rc = v["receipt"]
    signed = bytes.fromhex(rc["signed"])
    rec, body, sig = decode_receipt(signed)
    assert rec["recipient"] == rc["recipient"]
    assert encode_receipt(rec) == body
    verify_and_resign(rec["recipient"], RECEIPT_TYPE, body, sig)
    checked += 1
    print(json.dumps({"checked": checked}))


if __name__ == "__main__":
    main(sys.argv[1])
