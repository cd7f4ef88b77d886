"""pytest suite of the `audita` Python package (run by client/tests/python.rs with
AUDITA_KAFKA_BOOTSTRAP pointing at a real broker; .ci/run builds and installs the
wheel). Nothing is skipped: without a broker the broker tests fail, naming it."""

import os
import stat
import tempfile

import pytest

import audita


def broker() -> str:
    b = os.environ.get("AUDITA_KAFKA_BOOTSTRAP", "").strip()
    assert b, "AUDITA_KAFKA_BOOTSTRAP must name a Kafka broker (client/tests/python.rs sets it)"
    return b


def test_sign_cite_verify_and_refuse():
    planner = audita.Principal.generate("planner")
    other = audita.Principal.generate("planner")
    obs = planner.sign("dispatcher", 1_000, audita.external_input("wms", "crate 7 to dock 2"))
    assert obs.author == "planner" and obs.destination == "dispatcher"
    assert obs.payload == {"kind": "external_input", "source": "wms", "text": "crate 7 to dock 2"}
    assert obs.verify(planner.vkey)
    assert not obs.verify(other.vkey), "another key does not verify it"
    order = planner.sign("dispatcher", 1_010, audita.move_to("agv-7", 12_500, -3_000), cites=[obs],
                         effect=audita.at_position("agv-7", 12_500, -3_000, 50),
                         pins=audita.pins(model_id="planner-8b", model_hash="ab" * 32, seed=7,
                                          tools=[("route", "2.3.1")]))
    assert order.citations == [obs.id]
    assert order.effect["kind"] == "at_position"
    assert order.id.startswith("planner:") and len(order.id) == len("planner:") + 64
    # Same bytes decode to the same view.
    assert audita.Envelope.from_bytes(order.bytes) == order
    # A flipped bit: the signature no longer verifies (or the bytes no longer decode).
    tampered = bytearray(order.bytes)
    tampered[-1] ^= 1
    assert not audita.Envelope.from_bytes(bytes(tampered)).verify(planner.vkey)
    # The rules are enforced before signing, each with a one-line reason.
    with pytest.raises(ValueError, match="cite"):
        planner.sign("dispatcher", 1, audita.halt("agv-7"))
    with pytest.raises(ValueError, match="payload"):
        planner.sign("dispatcher", 1, {"kind": "teleport", "target": "agv-7"})
    with pytest.raises(ValueError, match="payload"):
        planner.sign("dispatcher", 1, {**audita.halt("agv-7"), "extra": 1}, cites=[obs])
    with pytest.raises(ValueError, match="message id"):
        planner.sign("dispatcher", 1, audita.halt("agv-7"), cites=["nonsense"])
    with pytest.raises(ValueError, match="name"):
        planner.sign("bad name!", 1, audita.external_input("x", "y"))


def test_receipts_are_the_recipients_to_sign():
    planner = audita.Principal.generate("planner")
    agv = audita.Principal.generate("agv-7")
    obs = planner.sign("dispatcher", 1_000, audita.sensor_report("lidar", "clear"))
    cmd = planner.sign("agv-7", 1_001, audita.halt("agv-7"), cites=[obs])
    r = agv.receipt(cmd, 1_002)
    assert r.message == cmd.id and r.recipient == "agv-7" and r.timestamp_ms == 1_002
    assert r.verify(agv.vkey) and not r.verify(planner.vkey)
    with pytest.raises(ValueError, match="addressed to dispatcher"):
        agv.receipt(obs, 1_003)


def test_key_files_are_created_private_and_loaded_by_name():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "keys", "planner.key")
        vkey = audita.generate_key_file(path, "planner")
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        p = audita.Principal.load("planner", path)
        assert p.vkey == vkey
        with pytest.raises(audita.AuditaError):
            audita.generate_key_file(path, "planner")  # never over an existing key
        with pytest.raises(audita.AuditaError, match="name"):
            audita.Principal.load("dispatcher", path)  # the key is planner's
        os.chmod(path, 0o644)
        with pytest.raises(audita.AuditaError, match="chmod 600"):
            audita.Principal.load("planner", path)


def test_an_unreachable_broker_spools_and_a_later_publisher_delivers():
    sensor = audita.Principal.generate("lidar-9")
    reports = [sensor.sign("supervisor", 1_000 + i, audita.sensor_report("lidar-9", f"r{i}")) for i in range(3)]
    with tempfile.TemporaryDirectory() as spool:
        down = audita.Publisher("127.0.0.1:9", spool, topic_prefix="py.", delivery_timeout_s=1.0)
        for r in reports:
            with pytest.raises(audita.Undelivered):
                down.publish(r)
        assert down.spooled == 3
        # One publisher per spool directory.
        with pytest.raises(audita.AuditaError, match="locked"):
            audita.Publisher(broker(), spool)
        down.close()
        del down
        up = audita.Publisher(broker(), spool, topic_prefix="py.")
        assert up.spooled == 0, "the new publisher sent what the old one spooled"
        partition, offset = up.publish(reports[0])
        assert partition >= 0 and offset >= 0
