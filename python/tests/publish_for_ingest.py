"""Publishes, using only the `audita` package: a registered planner's order and
command, the robot's receipt, a stranger's envelope and a tampered copy of the
command. client/tests/python.rs then runs the ingest stage over the same topics and
checks what it certified and what it quarantined, and why.

    python3 publish_for_ingest.py BOOTSTRAP TOPIC_PREFIX KEY_DIR SPOOL_DIR OUT_JSON
"""

import json
import sys

import audita

bootstrap, prefix, keys, spool, out = sys.argv[1:6]
planner = audita.Principal.load("planner", "planner.key", keys)
agv = audita.Principal.load("agv-1", "agv-1.key", keys)
stranger = audita.Principal.generate("stranger")

order = planner.sign("planner", 1_000, audita.external_input("wms", "crate 7 to dock 2"))
cmd = planner.sign("agv-1", 1_010, audita.move_to("agv-1", 4_000, 2_500), cites=[order],
                   effect=audita.at_position("agv-1", 4_000, 2_500, 50))
receipt = agv.receipt(cmd, 1_012)
foreign = stranger.sign("agv-1", 1_020, audita.external_input("x", "go"))
raw = bytearray(cmd.bytes)
raw[-1] ^= 1
tampered = audita.Envelope.from_bytes(bytes(raw))

with audita.Publisher(bootstrap, spool, topic_prefix=prefix) as pub:
    for item in (order, cmd, receipt, foreign, tampered):
        pub.publish(item)
    assert pub.spooled == 0

json.dump({
    "certified": [order.bytes.hex(), cmd.bytes.hex(), receipt.bytes.hex()],
    "quarantined": [foreign.bytes.hex(), tampered.bytes.hex()],
}, open(out, "w"))
