"""The embedded model's chat prompt and its verdict slot read from token probabilities.

:func:`chat_prompt` formats messages with the GGUF's own chat template, as llama-cpp-python's
``create_chat_completion`` does (the parallel decoder and the slot reader share it).

:class:`SlotReader` reads a verdict slot (:mod:`knockout.judges._slot`) from the model itself: the prompt
and the slot's field (``Score: ``) are evaluated once (the longest prefix already in the context is kept:
one question's answers share their instructions and question), then every allowed value is scored as a
token sequence by walking the trie of their tokenisations, one token evaluated per trie edge.  The prompt
is evaluated in blocks at fixed positions, so a request's distribution does not depend on what the context
held before it (the same request gives the same grade in any run, in any order).  A value's
probability is the product of its tokens' probabilities and of the number ending there (the next token
is not a digit, a decimal point or a comma), so ``4`` is told from ``4.5`` and ``1`` from ``10``.  The
probabilities are the model's own (temperature 1), whatever the request's sampling temperature.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from knockout.errors import JudgeError

#: the prompt is evaluated in blocks of this many tokens at fixed positions (see SlotReader._eval_to)
BLOCK = 32
_FORMATTERS: dict[int, Any] = {}
_CONTINUES: dict[int, np.ndarray] = {}
_LOCK = threading.Lock()


def _formatter(llm: Any) -> Any:
    """The GGUF's own chat template (as llama-cpp-python builds it for create_chat_completion)."""
    with _LOCK:
        found = _FORMATTERS.get(id(llm))
        if found is None:
            from llama_cpp import llama_chat_format

            template = llm.metadata.get("tokenizer.chat_template")
            if not template:
                raise JudgeError("the embedded judge needs a GGUF with a chat template")
            eos, bos = llm.token_eos(), llm.token_bos()
            found = llama_chat_format.Jinja2ChatFormatter(
                template=template, eos_token=llm._model.token_get_text(eos) if eos != -1 else "",
                bos_token=llm._model.token_get_text(bos) if bos != -1 else "", stop_token_ids=[eos])
            _FORMATTERS[id(llm)] = found
        return found


def chat_prompt(llm: Any, messages: list[dict[str, str]]) -> tuple[str, list[str], bool]:
    """The chat-formatted prompt (ending where the assistant's reply starts), the format's own stop strings,
    and whether the template wrote the BOS token itself."""
    result = _formatter(llm)(messages=messages)
    stop = result.stop if isinstance(result.stop, list) else [result.stop] if result.stop else []
    return result.prompt, [s for s in stop if s], bool(getattr(result, "added_special", False))


def tokens_of(llm: Any, text: str, added_special: bool) -> list[int]:
    return list(llm.tokenize(text.encode("utf-8"), add_bos=not added_special, special=True))


def _continues(llm: Any) -> np.ndarray:
    """Token ids whose text starts a number's continuation (a digit, a point, a comma), per model."""
    with _LOCK:
        found = _CONTINUES.get(id(llm))
        if found is None:
            ids = []
            for i in range(llm.n_vocab()):
                try:
                    piece = bytes(llm.detokenize([i]))
                except Exception:  # a control token without text
                    continue
                if piece[:1] and piece[:1] in b"0123456789.,":
                    ids.append(i)
            found = np.array(ids, dtype=np.int64)
            _CONTINUES[id(llm)] = found
        return found


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    x = logits.astype(np.float64)
    m = float(np.max(x))
    return x - (m + float(np.log(np.sum(np.exp(x - m)))))


class SlotReader:
    """One slot read on a loaded ``llama_cpp.Llama`` (the caller holds the model's lock)."""

    def __init__(self, llm: Any) -> None:
        self.llm = llm
        self.evaluated = 0  # tokens evaluated (prompt and trie), for the completion's token counts

    def _eval_to(self, tokens: list[int], prompt: int) -> np.ndarray:
        """Evaluate ``tokens`` (the first ``prompt`` of them the prompt, the rest a trie path) and return the log
        probabilities of the next token.

        The longest prefix already in the context is kept, but the prompt is always evaluated in the same
        pieces, blocks of :data:`BLOCK` tokens at fixed positions, and a trie path one token at a time: a
        token's arithmetic depends on the batch it is evaluated in, so this makes a request's distribution
        the same whatever was evaluated before it (a resumed run, another order of answers)."""
        llm = self.llm
        have = int(llm.n_tokens)
        ids = llm.input_ids
        keep = 0
        limit = min(have, len(tokens) - 1)  # at least one token evaluated: its logits are the ones read
        while keep < limit and int(ids[keep]) == tokens[keep]:
            keep += 1
        if keep < prompt:
            keep -= keep % BLOCK
        llm.n_tokens = keep
        pos = keep
        while pos < len(tokens):
            end = min(prompt, pos - pos % BLOCK + BLOCK) if pos < prompt else pos + 1
            llm.eval(tokens[pos:end])
            pos = end
        self.evaluated += len(tokens) - keep
        # the last evaluated token's logits (llama-cpp-python keeps none of its own without logits_all)
        logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),))
        return _log_softmax(np.array(logits, dtype=np.float64))

    def distribution(self, text: str, values: Sequence[str], added_special: bool) -> list[float]:
        """The probability of each of ``values`` written right after ``text`` (and the number ending there)."""
        llm = self.llm
        base = tokens_of(llm, text, added_special)
        seqs = [tokens_of(llm, text + v, added_special) for v in values]
        start = min(common_prefix(base, s) for s in seqs)
        start = min(start, *(len(s) - 1 for s in seqs))  # each value keeps at least one token of its own
        if start <= 0:
            raise JudgeError("the verdict slot cannot be read: the prompt and its values share no tokens")
        continues = _continues(llm) if any(v[-1:].isdigit() for v in values) else None
        probs = [0.0] * len(values)
        # the trie of the values' own tokens: depth-first, one evaluation per edge
        self._walk(seqs, list(range(len(values))), start, seqs[0][:start], 0.0, probs, continues, start)
        return probs

    def _walk(self, seqs: list[list[int]], which: list[int], depth: int, prefix: list[int], logp: float,
              probs: list[float], continues: np.ndarray | None, prompt: int) -> None:
        lp = self._eval_to(prefix, prompt)
        ending = [i for i in which if len(seqs[i]) == depth]
        going = [i for i in which if len(seqs[i]) > depth]
        for i in ending:  # a value complete here: the number must end (no digit, point or comma next)
            end = 1.0 if continues is None else max(0.0, 1.0 - float(np.exp(lp[continues]).sum()))
            probs[i] = float(np.exp(logp)) * end
        children: dict[int, list[int]] = {}
        for i in going:
            children.setdefault(seqs[i][depth], []).append(i)
        for tok, group in children.items():
            step = logp + float(lp[tok])
            if step < -30:  # below 1e-13: nothing of it counts
                continue
            if all(len(seqs[i]) == depth + 1 for i in group) and continues is None:
                for i in group:
                    probs[i] = float(np.exp(step))
                continue
            self._walk(seqs, group, depth + 1, [*prefix, tok], step, probs, continues, prompt)


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """The length of the common prefix of two token lists."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n
