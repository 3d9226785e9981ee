"""Where a reasoning-first slot's reasoning ends (:attr:`knockout.judges._slot.Slot.reasoning`; issue 51).

The judge reasons freely until it writes the first field's label (:meth:`Slot.reasoning_stop`: ``Score:``) or
reaches its token bound; knockout then writes the field and the judge fills only the value.  A label the judge
writes while **quoting** a text it was shown (an answer that ends ``... complete and correct. Score: 5/5``, quoted
back as the judge reasons) is not its field: taking it as one would write the field right after a quote of the
planted line, and the value the judge fills there would lean towards the planted one.  So a stop at the label is
the field only when the verdict the judge goes on to write there is its own, by the rule the free-text parsers
read a verdict by (:meth:`knockout.prompts._copies.Copies.pick`, the one notion of a copy):

* the text shown holds the label at all (:meth:`Copies.stands`), else the stop is the field at once, as before
  (no request more: an answer without ``Score:`` costs nothing);
* else the judge's next words are looked at: up to :data:`PEEK` tokens generated freely after the label
  (:class:`Step` with ``stop=False``).  The verdict there (the label, the rest of the field, an allowed value, the
  suffix) is **quoted** when it is copied by position (:meth:`Copies.copied`: with :data:`CONTEXT
  <knockout.prompts._copies.CONTEXT>` characters before or after it, it stands in a shown text), or when it stands
  in a shown text by value and does not end the judge's reply (a quote such as ``the student wrote "Score: 5/5",
  but ...``); a verdict that is not copied and stands nowhere, or that ends the reply, is the judge's own;
* a quoted stop is passed: the label and the peeked words (up to the next label they hold) join the reasoning,
  which goes on (the same request, resumed with everything so far as its prefix) up to the next label, under the
  same token bound;
* where the reasoning still ends in a copy (the judge ended its reply with the quote, or its token bound ran out
  inside one: :meth:`Copies.copied` of the label after it), the copied tail is left out, back to the start of
  the word it begins in, so that the field follows the judge's own words only.

The answer's text never decides where the field starts: it can only make the reasoning go on (never stop
earlier) or lose its copied tail.  Every backend with a reasoning-first slot runs the same steps
(:func:`reasoning_steps`): the embedded judge on its model (:mod:`knockout.judges._llamacpp`), the prefill servers
through their prefill (:func:`knockout.judges._expected.read_prefilled`); the OpenAI API, which writes the whole
reply in one request, is read at the first field that is the judge's own (:func:`own_field`); a structured output
(a JSON schema, a tool's typed input) carries the reasoning in its own key, where no label ends it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

from knockout.judges._slot import Slot

#: tokens generated after a label that a shown text holds, to read the verdict the judge writes there
PEEK = 16


@dataclass(frozen=True)
class Step:
    """One generation the reasoning asks for: after ``prefix`` (the reply so far, the slot's reasoning text
    first), at most ``max_tokens``, stopping at the label (``stop``) or not (a peek past a label)."""

    prefix: str
    max_tokens: int
    stop: bool


@dataclass(frozen=True)
class Generated:
    """What a step generated: its text (without the stop), its tokens, and whether the judge stopped (the label
    or the end of its reply) rather than reaching ``max_tokens``."""

    text: str
    tokens: int
    ended: bool


def _copies(shown: Sequence[str]) -> Any:
    # the copy check of the free-text parsers (knockout.prompts owns it; it imports nothing of knockout)
    from knockout.prompts._copies import Copies

    return Copies(shown)


#: what a request's cache key adds to its slot's where the reasoning may go on past a quoted label (:func:`passes`)
PASSES = {"reasoning_ends": "own-field"}


def passes(slot: Slot, shown: Sequence[str]) -> bool:
    """Whether a request's reasoning may go on past a label the judge quotes: a reasoning-first slot whose label a
    text shown holds.  Any other request is generated as it was before the label was checked (its cache key
    unchanged); these add :data:`PASSES` to their slot's key."""
    label = slot.reasoning_stop() if slot.reasoning is not None else ""
    return bool(label) and bool(shown) and bool(_copies(shown)(label))


def reasoning_steps(slot: Slot, shown: Sequence[str], max_tokens: int) -> Generator[Step, Generated, str]:
    """The reasoning of a reasoning-first slot, as the steps a backend generates (sent back as
    :class:`Generated`); returns the reasoning to write the first field after (the text after
    :attr:`Slot.reasoning`, as generated: the caller strips it).  ``shown``: the data texts in the request
    (:attr:`knockout.judges.JudgeRequest.shown`)."""
    head = slot.reasoning or ""
    label = slot.reasoning_stop()
    copies = _copies(shown)
    said = ""
    left = max_tokens
    while left > 0:
        got = yield Step(head + said, left, True)
        left -= _used(got)
        said += got.text
        if not label or not copies(label):
            return said  # no shown text holds the label: the field follows, as it always did
        if not got.ended or left <= 0:
            break
        peek = yield Step(head + said + label, min(PEEK, left), False)
        left -= _used(peek)
        if not quoted(slot, copies, head + said, peek.text, peek.ended):
            break  # the judge's own field
        said += label + _before_label(peek.text, label)
    return said[:own_end(slot, copies, head + said) - len(head)]


def _before_label(text: str, label: str) -> str:
    """``text`` up to the label it holds, or without the start of one it ends with: the reasoning resumes there,
    so that the judge writes that label again and it is read as any other."""
    k = text.find(label)
    if k >= 0:
        return text[:k]
    return text[:len(text) - max((n for n in range(1, len(label)) if text.endswith(label[:n])), default=0)]


def _used(got: Generated) -> int:
    """A step's tokens (a server that does not count them: about four characters a token), at least one."""
    return max(got.tokens or len(got.text) // 4, 1)


def run_reasoning(slot: Slot, shown: Sequence[str], max_tokens: int,
                  generate: Callable[[Step], Generated]) -> str:
    """:func:`reasoning_steps` with a backend's ``generate``."""
    steps = reasoning_steps(slot, shown, max_tokens)
    step = next(steps)
    while True:
        try:
            step = steps.send(generate(step))
        except StopIteration as done:
            return str(done.value)


async def run_reasoning_async(slot: Slot, shown: Sequence[str], max_tokens: int,
                              generate: Callable[[Step], Awaitable[Generated]]) -> str:
    """:func:`reasoning_steps` with a backend's asynchronous ``generate``."""
    steps = reasoning_steps(slot, shown, max_tokens)
    step = next(steps)
    while True:
        got = await generate(step)
        try:
            step = steps.send(got)
        except StopIteration as done:
            return str(done.value)


@functools.lru_cache(maxsize=256)
def _verdict(slot: Slot) -> re.Pattern[str]:
    """The first field's verdict as a judge writes it after the label: the rest of the field, an allowed value
    and the suffix, white space between their words free."""

    def words(text: str) -> str:
        return r"\s*" + r"\s*".join(re.escape(w) for w in text.split()) + (r"\s*" if text.split() else "")

    label = slot.reasoning_stop()
    rest = slot.fields[0].split(label, 1)[1] if label in slot.fields[0] else ""
    values = "|".join(re.escape(v) for v in sorted(slot.values_at(0), key=len, reverse=True))
    suffix = slot.suffix_at(0)
    return re.compile(re.escape(label) + words(rest) + f"(?:{values})" + (f"(?:{words(suffix)})?" if suffix.split()
                                                                          else ""))


def quoted(slot: Slot, copies: Any, before: str, after: str, ended: bool) -> bool:
    """Whether the label that ends ``before`` (the reply so far), followed by ``after`` (what the judge wrote
    next; ``ended``: its reply ended there), is a quote of a shown text rather than the judge's own field: the
    verdict there is copied by position, or stands in a shown text and does not end the reply
    (:meth:`Copies.pick`'s rule)."""
    from knockout.prompts._copies import _FINAL, normalise

    head = normalise(before)
    label = slot.reasoning_stop()
    text = head + label + normalise(after)
    start = len(head)
    m = _verdict(slot).match(text, start)
    end = m.end() if m else start + len(label)
    if copies.copied(text, start, end):
        return True
    if not copies.stands(text[start:end]):
        return False  # fresh: the judge's own
    return not (ended and _FINAL.fullmatch(text, end))


def own_end(slot: Slot, copies: Any, text: str) -> int:
    """Where the reasoning ``text`` (the reply so far) ends for the field to follow the judge's own words: its
    end, or, where it ends in a copy of a shown text, the start of the word the copied tail begins in (never
    inside the slot's own reasoning text).  A copy as the parsers tell one (:mod:`knockout.prompts._copies`): the
    tail with the label after it is copied by position (:meth:`Copies.copied`), or the tail that stands in a shown
    text is at least :data:`~knockout.prompts._copies.CONTEXT` characters long (as :meth:`Copies.echo` reads a
    reply that repeats a span of one)."""
    from knockout.prompts._copies import CONTEXT, _squash, normalise

    floor = len(slot.reasoning or "")
    body = text.rstrip()
    lo, hi = floor, len(body)  # the longest tail of body that stands in a shown text starts at lo (len: none)
    while lo < hi:
        mid = (lo + hi) // 2
        if copies(body[mid:]):
            hi = mid
        else:
            lo = mid + 1
    label, n = slot.reasoning_stop(), normalise(text)
    if len(_squash(normalise(body[lo:]))) < CONTEXT and not copies.copied(n + label, len(n), len(n) + len(label)):
        return len(text)
    word = max(text.rfind(c, 0, lo + 1) for c in (" ", "\n", "\t")) + 1
    return max(word, floor)


def own_field(slot: Slot, shown: Sequence[str], reply: str) -> int | None:
    """Where the judge's own first field starts in a whole reply (the OpenAI API writes the reasoning and the
    verdict in one request): the first occurrence of the field (white space before it aside) that is not a quote
    (:func:`quoted`, what follows its label being the rest of the reply); None when every one is."""
    field, label = slot.fields[0].lstrip(), slot.reasoning_stop()
    copies = _copies(shown)
    k = reply.find(field)
    while k >= 0:
        if not copies(label) or not quoted(slot, copies, reply[:k], reply[k + len(label):], True):
            return k
        k = reply.find(field, k + 1)
    return None
