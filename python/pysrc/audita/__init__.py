"""Sign, cite and publish Audita evidence from Python.

Every inter-agent command an Audita deployment audits is a signed *envelope*: its
author, its destination, a typed payload, the ids of the messages it acted on
(citations), the state change it commits to (effect) and replay pins. Recipients
acknowledge what they received with signed *receipts*. This package builds and signs
both with a principal's own key, in exactly the bytes the Rust implementation
produces (it *is* the Rust implementation, through PyO3), and publishes them to a
deployment's Kafka topics through a durable local spool, so nothing is lost while
the broker is unreachable.

    >>> import audita
    >>> planner = audita.Principal.load("planner", "keys/planner.key")  # doctest: +SKIP
    >>> obs = planner.sign("dispatcher", audita.unix_ms(),
    ...                    audita.external_input("wms", "order 7: crate to dock 2"))  # doctest: +SKIP
    >>> order = planner.sign("dispatcher", audita.unix_ms(),
    ...                      audita.agent_text("send agv-7 to dock 2"),
    ...                      cites=[obs], effect=audita.claim("crate 7 assigned to agv-7"))  # doctest: +SKIP
    >>> with audita.Publisher("127.0.0.1:9092", "spool/planner") as pub:  # doctest: +SKIP
    ...     pub.publish(obs); pub.publish(order)

Payloads, effects and pins are plain dicts (use the helper functions below); integers
are physical units (millimetres, mm/s, milli-units), never floats. Sensor reports and
external inputs are roots; every other payload must cite what it acted on, or
signing raises ``ValueError``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Tuple, Union

from . import _native
from ._native import AuditaError, Undelivered, generate_key_file

__all__ = [
    "AuditaError",
    "Undelivered",
    "Principal",
    "Envelope",
    "Receipt",
    "Publisher",
    "generate_key_file",
    "unix_ms",
    "move_to",
    "set_speed",
    "halt",
    "set_param",
    "agent_text",
    "tool_output",
    "sensor_report",
    "external_input",
    "at_position",
    "speed",
    "halted",
    "param",
    "claim",
    "pins",
]

Json = Dict[str, Any]


def unix_ms() -> int:
    """Milliseconds since the Unix epoch: the record time of a live deployment."""
    return time.time_ns() // 1_000_000


# -- payloads ---------------------------------------------------------------


def move_to(target: str, x_mm: int, y_mm: int) -> Json:
    """Drive actuator ``target`` to (x_mm, y_mm)."""
    return {"kind": "move_to", "target": target, "x_mm": int(x_mm), "y_mm": int(y_mm)}


def set_speed(target: str, mm_per_s: int) -> Json:
    """Set the speed of ``target``."""
    return {"kind": "set_speed", "target": target, "mm_per_s": int(mm_per_s)}


def halt(target: str) -> Json:
    """Halt ``target``."""
    return {"kind": "halt", "target": target}


def set_param(target: str, name: str, value: int) -> Json:
    """Set parameter ``name`` of a machine or batch to ``value`` milli-units."""
    return {"kind": "set_param", "target": target, "name": name, "value": int(value)}


def agent_text(text: str) -> Json:
    """An agent's (LLM's) text output: an instruction, a plan."""
    return {"kind": "agent_text", "text": text}


def tool_output(tool: str, output: str) -> Json:
    """A tool's output."""
    return {"kind": "tool_output", "tool": tool, "output": output}


def sensor_report(sensor: str, reading: str) -> Json:
    """A sensor reading (a root: may cite nothing)."""
    return {"kind": "sensor_report", "sensor": sensor, "reading": reading}


def external_input(source: str, text: str) -> Json:
    """Input from outside the recorded system, e.g. an operator's order (a root)."""
    return {"kind": "external_input", "source": source, "text": text}


# -- effects ----------------------------------------------------------------


def at_position(target: str, x_mm: int, y_mm: int, tolerance_mm: int) -> Json:
    """Commitment: ``target`` ends within ``tolerance_mm`` of (x_mm, y_mm)."""
    return {"kind": "at_position", "target": target, "x_mm": int(x_mm), "y_mm": int(y_mm), "tolerance_mm": int(tolerance_mm)}


def speed(target: str, mm_per_s: int) -> Json:
    """Commitment: ``target`` moves at ``mm_per_s``."""
    return {"kind": "speed", "target": target, "mm_per_s": int(mm_per_s)}


def halted(target: str) -> Json:
    """Commitment: ``target`` is stopped."""
    return {"kind": "halted", "target": target}


def param(target: str, name: str, value: int) -> Json:
    """Commitment: parameter ``name`` of ``target`` equals ``value`` milli-units."""
    return {"kind": "param", "target": target, "name": name, "value": int(value)}


def claim(text: str) -> Json:
    """Any other declared work-state commitment, as text."""
    return {"kind": "claim", "text": text}


def pins(model_id: Optional[str] = None, model_hash: Optional[str] = None, seed: Optional[int] = None,
         tools: Iterable[Tuple[str, str]] = ()) -> Json:
    """Replay pins: the model (id, weights hash as 64 hex digits), sampling seed and
    tool versions a replay of this author must hold fixed."""
    out: Json = {"tools": [{"name": n, "version": v} for n, v in tools]}
    if model_id is not None:
        out["model_id"] = model_id
    if model_hash is not None:
        out["model_hash"] = model_hash
    if seed is not None:
        out["seed"] = int(seed)
    return out


# -- signed objects ---------------------------------------------------------


@dataclass(frozen=True)
class Envelope:
    """A signed envelope: its exact bytes and their decoded view."""

    bytes: bytes
    id: str
    author: str
    destination: str
    timestamp_ms: int
    payload: Json
    citations: List[str]
    effect: Json

    @staticmethod
    def from_bytes(data: bytes) -> "Envelope":
        """Decodes envelope bytes (does not check the signature: see ``verify``)."""
        v = json.loads(_native.decode_envelope(bytes(data)))
        return Envelope(bytes=bytes(data), **v)

    def verify(self, vkey: str) -> bool:
        """Whether the signature verifies under ``vkey`` and the format's rules hold."""
        return _native.verify_envelope(self.bytes, vkey)


@dataclass(frozen=True)
class Receipt:
    """A signed delivery receipt."""

    bytes: bytes
    message: str
    recipient: str
    timestamp_ms: int

    @staticmethod
    def from_bytes(data: bytes) -> "Receipt":
        """Decodes receipt bytes (does not check the signature)."""
        v = json.loads(_native.decode_receipt(bytes(data)))
        return Receipt(bytes=bytes(data), **v)

    def verify(self, vkey: str) -> bool:
        """Whether the recipient's signature verifies under ``vkey``."""
        return _native.verify_receipt(self.bytes, vkey)


Citable = Union[Envelope, str]


class Principal:
    """A principal (planner, agent, controller, sensor): its name and private key.
    The key stays inside the native object."""

    def __init__(self, native: "_native.Principal"):
        self._p = native

    @staticmethod
    def load(name: str, source: str, base: str = ".") -> "Principal":
        """The key file ``source`` (relative to ``base``; or ``env:VAR``) of ``name``:
        a C2SP note private key named ``name`` or PKCS#8 PEM, readable by its owner only."""
        return Principal(_native.Principal.load(name, source, base))

    @staticmethod
    def generate(name: str) -> "Principal":
        """A principal with a fresh in-memory key (register ``vkey`` with the deployment)."""
        return Principal(_native.Principal.generate(name))

    @property
    def name(self) -> str:
        return self._p.name

    @property
    def vkey(self) -> str:
        """The public key as a C2SP verifier key (``name+hash+base64``)."""
        return self._p.vkey

    def sign(self, destination: str, timestamp_ms: int, payload: Json, cites: Iterable[Citable] = (),
             effect: Optional[Json] = None, pins: Optional[Json] = None) -> Envelope:
        """Signs an envelope to ``destination``. ``cites`` are the messages it acted on
        (envelopes or ``author:hex64`` ids); ``effect`` the committed state change."""
        ids = [c.id if isinstance(c, Envelope) else str(c) for c in cites]
        raw = self._p.sign(destination, int(timestamp_ms), json.dumps(payload), ids,
                           None if effect is None else json.dumps(effect),
                           None if pins is None else json.dumps(pins))
        return Envelope.from_bytes(raw)

    def receipt(self, envelope: Envelope, timestamp_ms: int) -> Receipt:
        """The delivery receipt for ``envelope``, which must be addressed to this principal."""
        return Receipt.from_bytes(self._p.receipt(envelope.bytes, int(timestamp_ms)))


class Publisher:
    """Publishes envelopes and receipts to a deployment's Kafka topics
    (``<prefix>audita.envelopes`` keyed by author, ``<prefix>audita.receipts`` keyed by
    recipient). Each item is first written durably to the spool directory and removed
    once the broker acknowledged it; ``Undelivered`` means it is safe in the spool and
    ``resend_spool()`` (also run when a publisher opens) sends it again. The record
    dedupes re-sent items by message id."""

    def __init__(self, bootstrap: str, spool_dir: str, topic_prefix: str = "", delivery_timeout_s: float = 30.0):
        self._p = _native.Publisher(bootstrap, spool_dir, topic_prefix, float(delivery_timeout_s))

    def publish(self, item: Union[Envelope, Receipt]) -> Tuple[int, int]:
        """Publishes and waits for the acknowledgement; returns (partition, offset)."""
        if isinstance(item, Receipt):
            return self._p.publish_receipt(item.bytes)
        return self._p.publish(item.bytes)

    def resend_spool(self) -> Tuple[int, int]:
        """Sends the spool again; returns (delivered, still spooled)."""
        return self._p.resend_spool()

    @property
    def spooled(self) -> int:
        """Items waiting in the spool."""
        return self._p.spooled

    def close(self) -> None:
        """Releases the spool (its items stay on disk for the next publisher)."""
        self._p = None  # type: ignore[assignment]

    def __enter__(self) -> "Publisher":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
