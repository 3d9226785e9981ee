"""What the engine needs from a cache of judge calls, and the key a call is cached under.

The engine depends on this protocol only; :class:`knockout.storage.Store` implements it with SQLite.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from knockout.judges._base import GenParams, Message, image_digest
from knockout.judges._slot import Slot


def call_key(identity: dict[str, Any], params: GenParams, messages: list[Message], draw: int = 0) -> str:
    """SHA-256 over the judge identity, parameters and full messages (images by content); ``draw`` (the
    index of a repeated draw, ``--samples``) enters the key only when it is not 0, so that a single draw's
    key is what it always was."""
    return KeyMaker(identity, params, draw)(messages)


def slot_key(slot: Slot, shown: Sequence[str] = ()) -> dict[str, Any]:
    """What a request's key holds of its slot: :meth:`Slot.key`, and where the reasoning of a reasoning-first slot
    may go on past a label the judge quotes from ``shown`` (:func:`knockout.judges._reasoning.passes`), that."""
    from knockout.judges._reasoning import PASSES, passes

    return {**slot.key(), **PASSES} if passes(slot, shown) else slot.key()


class KeyMaker:
    """:func:`call_key` for one judge and one set of parameters: their JSON is written once, and each key
    hashes the same bytes ``call_key``'s payload (sorted keys: draw when not 0, judge, messages, params)
    would."""

    def __init__(self, identity: dict[str, Any], params: GenParams, draw: int = 0) -> None:
        self.head = (f'{{"draw": {draw}, ' if draw else "{") + '"judge": ' + json.dumps(
            identity, sort_keys=True, ensure_ascii=False) + ', "messages": '
        self.tail = ', "params": ' + json.dumps(params.model_dump(mode="json"), sort_keys=True,
                                                ensure_ascii=False) + "}"

    def __call__(self, messages: list[Message], slot: Slot | None = None, mode: str | None = None,
                 shown: Sequence[str] = ()) -> str:
        """The key of a request; a verdict slot and its mode enter it only when there is one (a request without
        a slot keeps the key it always had), and a reasoning-first slot's reasoning read past quoted labels only
        where ``shown`` (the data texts shown) holds its label (:func:`slot_key`)."""
        body = json.dumps([{"content": m.content, "images": [image_digest(p) for p in m.images], "role": m.role}
                           for m in messages], ensure_ascii=False)
        tail = self.tail if slot is None else (
            f'{self.tail[:-1]}, "slot": {json.dumps(slot_key(slot, shown), sort_keys=True, ensure_ascii=False)}, '
            f'"slot_mode": {json.dumps(mode)}}}')
        return hashlib.sha256((self.head + body + tail).encode()).hexdigest()


@dataclass
class CallRecord:
    """One judge call that returned: its raw reply, what its request's parse made of it, what it cost.

    ``parse_id`` is the identity of the parse that made ``parsed`` (``parse_identity`` of the request's
    parse: its code and arguments), set only when the reply was valid and ``parsed`` is plain JSON that
    reads back as itself: a later request with the same key and the same parse identity may use
    ``parsed`` instead of parsing the reply again."""

    key: str
    reply: str
    parsed: Any
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    finish_reason: str | None
    images_dropped: int
    parse_id: bytes | None = None
    #: the slot verdict the backend returned with the reply (:mod:`knockout.judges._slot`); None for free text
    verdict: dict[str, Any] | None = None


class Cache(Protocol):
    """Where the engine finds replies it already has and records every call it makes."""

    def get_call(self, key: str) -> CallRecord | None:
        """The stored reply for ``key``, or None."""

    def get_calls(self, keys: list[str]) -> dict[str, CallRecord]:
        """The stored replies of those of ``keys`` that have one, in one look-up."""

    def put_call(self, key: str, identity: dict[str, Any], request: dict[str, Any], record: CallRecord) -> None:
        """Store a reply the moment it arrives (a killed run keeps it)."""

    def record_replies(self, replies: list[tuple[str, dict[str, Any], dict[str, Any], CallRecord, str | None, float]]
                       ) -> None:
        """Live calls' replies as they arrive, each ``(key, identity, request, record, run_id, started)``:
        stored, their leases released and the calls logged, in one write (a killed run keeps them all, or,
        killed before, the leases that say the calls were in flight)."""

    def log_call(self, key: str, run_id: str | None, started: float, error: str | None = None) -> None:
        """Record one live call (sent to a backend), successful or not."""

    def claim(self, key: str, run_id: str | None, lease_s: float) -> bool:
        """Record ``key`` as in flight for this process before it is sent; False when another live process
        holds it (then the caller waits for that process's reply instead of paying for the call twice)."""

    def claim_many(self, keys: list[str], run_id: str | None, lease_s: float) -> list[bool]:
        """:meth:`claim` for each of ``keys``, in one write."""

    def release(self, key: str) -> None:
        """``key`` is no longer in flight for this process."""
