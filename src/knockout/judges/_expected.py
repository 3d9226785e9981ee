"""The expected grade read from a server's token probabilities (the ``expected`` verdict mode of ``openai:``).

The embedded judge scores every allowed value as a token sequence on the model itself
(:class:`knockout.judges._chat.SlotReader`).  A server gives less: the ``top_logprobs`` (at most 20) most probable
next tokens, as text, at a position.  The same reading is built from that, in text:

* **Servers that continue a prefill** (vLLM's ``continue_final_message``, llama.cpp's ``llama-server`` with a
  trailing assistant message, ``python -m llama_cpp.server``'s completions endpoint with the chat template applied
  here): :func:`walk` asks for the next token's alternatives after the verdict's field (``Score: ``), and after
  each text that is a proper prefix of an allowed value (``4`` on the way to ``4.5``, ``1`` on the way to ``10``)
  asks again with that text prefilled: one request per node of the values' trie, as the embedded reader evaluates
  one token per edge.  A value's probability is the product along its path and, for numbers, of the number ending
  there (the next token does not start with a digit, a point or a comma), so ``4`` is told from ``4.5`` and ``1``
  from ``10``.  A branch below :data:`PRUNE` is not followed (its probability counts as not covered).
* **The OpenAI API itself** (no prefill): one request, the reply read at the position where the judge wrote the
  value after the field (:func:`reply_probes`); only the path the judge wrote is seen past its first token.
  OpenAI's tokenizers write a number of up to three digits as one token, so a whole-point scale is read exactly
  from the first position; a half point (``4.5``: ``4``, ``.``, ``5``) is seen only after the digit the judge wrote,
  and every other digit's probability counts as its whole point: such a grade is marked ``exact: false``.

Probabilities a server does not list (outside its top 20) are not invented: the distribution is over the allowed
values seen, its ``mass`` (their share of the probability) is stored, and below :data:`MIN_MASS` the verdict is
invalid (asked again with the format reminder, then recorded invalid), never a grade.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from knockout.judges._base import GenParams
from knockout.judges._slot import MIN_MASS, Slot, distribution, invalid

#: alternatives per position asked of a server (the OpenAI API's maximum ``top_logprobs``)
TOP = 20
#: a branch of the values' trie less probable than this is not asked for (its probability counts as not covered)
PRUNE = 1e-4
#: what continues a number (a value ending there is not the number written)
CONTINUES = "0123456789.,"

#: the next token's alternatives at a position, as (text, log probability); None: the server gave none
Alternatives = list[tuple[str, float]] | None
#: ask the alternatives after ``state`` (the text written after the field): a server request, or a look-up
Ask = Callable[[str], Awaitable[Alternatives]]


@dataclass
class Walk:
    """What :func:`walk` read: each value's probability, whether every branch was seen (``exact``), the requests
    made, and why nothing could be read (``error``)."""

    probs: list[float]
    exact: bool = True
    asked: int = 0
    error: str | None = None


async def walk(values: Sequence[str], ask: Ask, grouped_digits: bool = False) -> Walk:
    """The probability of each of ``values`` written next, from the alternatives ``ask`` gives at each text written
    so far (``""``: right after the field).  ``ask`` returning None where the walk needs a position it cannot see
    (a reply read along the path the judge wrote) makes a value ending there count whole, and the reading not
    ``exact`` when a longer allowed value starts there (with ``grouped_digits``, a tokenizer that writes up to
    three digits as one token, only where that longer value goes on with a point or a comma: ``1`` and ``10``
    are both first tokens there)."""
    index = {v: i for i, v in enumerate(values)}
    numbers = any(v[-1:].isdigit() for v in values)
    out = Walk([0.0] * len(values))

    async def visit(state: str, p: float) -> None:
        alts = await ask(state)
        out.asked += 1
        if alts is None:
            if not state:
                out.error = "the server returned no token probabilities at the verdict"
                return
            # not seen: a value written up to here ends here; a text on the way to values goes to the one value it
            # can become (``4.`` to ``4.5``), else its probability is not covered
            longer = [v for v in values if v != state and v.startswith(state)]
            if state in index:
                out.probs[index[state]] += p
                if any(not (grouped_digits and v[len(state)].isdigit()) for v in longer):
                    out.exact = False
            else:
                if len(longer) == 1:
                    out.probs[index[longer[0]]] += p
                out.exact = False
            return
        if state in index:  # a value written up to here: its number must end
            cont = sum(math.exp(lp) for t, lp in alts if t[:1] and t[0] in CONTINUES) if numbers else 0.0
            out.probs[index[state]] += p * max(0.0, 1.0 - cont)
        merged: dict[str, float] = {}
        for t, lp in alts:
            if t:
                merged[state + t] = merged.get(state + t, 0.0) + math.exp(lp)
        deeper: list[tuple[str, float]] = []
        for u, q0 in merged.items():
            q = p * q0
            if q < PRUNE:
                continue
            if any(v != u and v.startswith(u) for v in values) or (u in index and numbers):
                deeper.append((u, q))  # on the way to a value, or a number that may go on
            elif u in index:
                out.probs[index[u]] += q
            else:  # a token that ends a value and goes on with something else ("4/")
                ended = [v for v in values if len(v) > len(state) and u.startswith(v)
                         and (not numbers or u[len(v)] not in CONTINUES)]  # (a value == state: counted above)
                if ended:
                    out.probs[index[max(ended, key=len)]] += q
        await asyncio.gather(*(visit(u, q) for u, q in deeper))

    await visit("", 1.0)
    return out


@dataclass
class Probe:
    """One request's reading: the alternatives at the value and the tokens it cost."""

    alternatives: Alternatives
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failed_attempts: int = 0


@dataclass
class Reading:
    """A slot read by prefill requests: the verdict (a distribution, or invalid saying why), the text written,
    and the tokens and requests it cost."""

    verdict: dict[str, Any]
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failed_attempts: int = 0
    requests: int = 0
    costs: list[Probe] = field(default_factory=list)


def _mass_error(i: int, mass: float) -> str:
    return (f"field {i + 1}: the allowed values carry {mass:.2f} of the probability the server listed "
            f"(< {MIN_MASS}): the judge wanted to write something else")


#: ``explain(prefill, max_tokens, stop)``: what the judge writes after the assistant's reply begun with ``prefill``,
#: whether it stopped before ``max_tokens`` (a stop or the end of its reply), and the request's cost
Explain = Callable[[str, int, list[str]], Awaitable[tuple[str, bool, Probe]]]


async def read_prefilled(slot: Slot, probe: Callable[[str], Awaitable[Probe]], explain: Explain | None, via: str,
                         params: GenParams | None = None, shown: Sequence[str] = ()) -> Reading:
    """A verdict slot read from a server that continues a prefill: ``probe(prefill)`` gives the next token's
    alternatives after the assistant's reply begun with ``prefill``; each field's distribution is walked
    (:func:`walk`), its most probable value written before the next field, as the embedded reader does; with
    ``then``, ``explain`` writes the line after it; a reasoning-first slot's reasoning is written first by
    ``explain``, up to the judge's own first field (:mod:`knockout.judges._reasoning`: ``shown`` are the data texts
    of the request), and the fields after it.  ``params``: the request's token bound and stops."""
    from knockout.judges._reasoning import Generated, Step, run_reasoning_async

    p = params or GenParams()
    costs: list[Probe] = []
    written = ""
    chosen: list[str] = []
    probs: list[list[float]] = []
    masses: list[float] = []
    requests = 0
    if slot.reasoning is not None and explain is not None:
        say = explain

        async def generate(step: Step) -> Generated:
            nonlocal requests
            text, stopped, cost = await say(step.prefix, step.max_tokens,
                                            [*([slot.reasoning_stop()] if step.stop else []), *p.stop])
            costs.append(cost)
            requests += 1
            return Generated(text, cost.completion_tokens, stopped)

        written = slot.reasoning + (await run_reasoning_async(slot, shown, p.max_tokens, generate)).strip()
    for i, name in enumerate(slot.fields):
        written += name
        base = written

        async def ask(state: str, base: str = base) -> Alternatives:
            got = await probe(base + state)
            costs.append(got)
            return got.alternatives

        values = slot.values_at(i)
        read = await walk(values, ask)
        requests += read.asked
        mass = sum(read.probs)
        if read.error is not None or mass < MIN_MASS:
            why = read.error or _mass_error(i, mass)
            return _reading(invalid(why, "expected"), written, costs, requests)
        best = values[max(range(len(read.probs)), key=read.probs.__getitem__)]
        chosen.append(best)
        probs.append(read.probs)
        masses.append(mass)
        written += best + slot.suffix_at(i)
    if slot.then and explain is not None:
        written += slot.then
        tail, _, cost = await explain(written, p.max_tokens, ["\n", *p.stop])
        costs.append(cost)
        requests += 1
        written += tail
    verdict = {**distribution(slot, probs, chosen), "mass": masses, "exact": True, "via": via,
               "requests": requests}
    return _reading(verdict, written, costs, requests)


def _reading(verdict: dict[str, Any], text: str, costs: list[Probe], requests: int) -> Reading:
    return Reading(verdict, text, sum(c.prompt_tokens for c in costs), sum(c.completion_tokens for c in costs),
                   sum(c.failed_attempts for c in costs), requests, costs)


# -- the OpenAI API: one reply, read where the judge wrote the value -------------------------------------------
def chat_logprobs(data: Any) -> list[tuple[str, list[tuple[str, float]]]] | None:
    """The reply's tokens with their alternatives (``choices[0].logprobs.content``: each ``token`` with its
    ``top_logprobs``), or None when the reply has none."""
    try:
        content = data["choices"][0]["logprobs"]["content"]
    except (KeyError, IndexError, TypeError):
        return None
    if not isinstance(content, list):
        return None
    out: list[tuple[str, list[tuple[str, float]]]] = []
    for item in content:
        if not isinstance(item, dict) or not isinstance(item.get("token"), str):
            return None
        alts = alternatives(item.get("top_logprobs"))
        if alts is None:
            return None
        out.append((item["token"], alts))
    return out


def alternatives(top: Any) -> list[tuple[str, float]] | None:
    """A position's alternatives as a chat reply lists them (``[{"token", "logprob"}, ...]``) or as a completions
    reply does (``{token: logprob}``); None when they are not that."""
    pairs: list[tuple[Any, Any]]
    if isinstance(top, dict):
        pairs = list(top.items())
    elif isinstance(top, list):
        pairs = [(a.get("token"), a.get("logprob")) if isinstance(a, dict) else (None, None) for a in top]
    else:
        return None
    out = []
    for t, lp in pairs:
        if not isinstance(t, str) or isinstance(lp, bool) or not isinstance(lp, int | float):
            return None
        if math.isfinite(lp) and lp <= 1e-6:
            out.append((t, float(lp)))
    return out


async def read_reply(slot: Slot, text: str, tokens: list[tuple[str, list[tuple[str, float]]]] | None,
               via: str, shown: Sequence[str] = ()) -> dict[str, Any]:
    """A slot verdict read from one reply with its token alternatives (the OpenAI API: no prefill).  The reply must
    begin with the verdict as the slot writes it (each field, a value, the suffix), or, in a reasoning-first slot,
    write it after its reasoning (the verdict begins where the reply first writes the first field as its own, not
    quoting it from ``shown``, the data texts of the request: :func:`knockout.judges._reasoning.own_field`; white
    space before it aside); each field's distribution is read at the position where the judge wrote the value,
    following only the path it wrote (:func:`walk` with the positions the reply shows).  A reply that does not
    begin with the verdict (or has none after its reasoning), or without probabilities there, is an invalid
    verdict saying why."""
    if tokens is None:
        return invalid("the server returned no token probabilities (logprobs) with the reply", "expected")
    starts = [0]
    for t, _ in tokens:
        starts.append(starts[-1] + len(t))
    written_all = "".join(t for t, _ in tokens)
    written = ""
    names = list(slot.fields)
    if slot.reasoning is not None:
        from knockout.judges._reasoning import own_field

        names[0] = names[0].lstrip()
        if names[0] not in written_all:
            return invalid(f"the reply writes no verdict ({names[0]!r}) after its reasoning", "expected")
        k = own_field(slot, shown, written_all)
        if k is None:
            return invalid(f"every verdict ({names[0]!r}) in the reply is quoted from the text being judged, none "
                           "is the judge's own", "expected")
        written = written_all[:k]
    chosen: list[str] = []
    probs: list[list[float]] = []
    masses: list[float] = []
    exact = True
    for i, name in enumerate(names):
        prefix = written + name
        if not written_all.startswith(prefix):
            return invalid(f"the reply does not begin with its verdict ({prefix!r})", "expected")
        at = len(prefix)
        # the token holding the value's first character, and the part of the field it holds
        pos = next((j for j in range(len(tokens)) if starts[j] <= at < starts[j + 1]), None)
        if pos is None:
            return invalid(f"the reply ends before the value of {name.strip()!r}", "expected")
        head = written_all[starts[pos]:at]

        def seen(state: str, pos: int = pos, head: str = head, at: int = at) -> Alternatives:
            """The alternatives after ``state``, where the reply shows them: along the text the judge wrote."""
            if state and not written_all.startswith(state, at):
                return None
            j = pos if not state else next((k + 1 for k in range(pos, len(tokens)) if starts[k + 1] == at + len(state)),
                                           None)
            if j is None or j >= len(tokens):
                return None
            strip = head if j == pos else ""
            return [(t[len(strip):], lp) for t, lp in tokens[j][1] if t.startswith(strip)]

        async def ask(state: str) -> Alternatives:
            return seen(state)

        values = slot.values_at(i)
        read = await walk(values, ask, grouped_digits=True)
        mass = sum(read.probs)
        if read.error is not None or mass < MIN_MASS:
            return invalid(read.error or _mass_error(i, mass), "expected")
        exact = exact and read.exact
        value = next((v for v in sorted(values, key=len, reverse=True) if written_all.startswith(v, at)
                      and not written_all[at + len(v): at + len(v) + 1].isdigit()), None)
        if value is None:  # the judge wrote no allowed value: its most probable one stands for the text
            value = values[max(range(len(read.probs)), key=read.probs.__getitem__)]
        chosen.append(value)
        probs.append(read.probs)
        masses.append(mass)
        written = prefix + value + slot.suffix_at(i)
    return {**distribution(slot, probs, chosen), "mass": masses, "exact": exact, "via": via, "requests": 1}

