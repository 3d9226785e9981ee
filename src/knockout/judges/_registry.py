"""Judge backends found by name from a spec string.

Spec grammar: ``BACKEND[:MODEL][?key=value&key=value]``, e.g. ``llamacpp``,
``llamacpp:qwen2.5-coder-0.5b``, ``openai:gpt-4o-mini``,
``openai:local?base_url=http://127.0.0.1:8080/v1``, ``anthropic:claude-3-5-haiku-latest``,
``scripted?noise=0.5``.  Options given on the command line (``--judge-opt``) are
merged over the spec's; each backend checks them against its typed ``Options``
(an unknown or mistyped option is a ConfigError naming it and the accepted ones).
Third-party backends are found through the entry-point group ``knockout.backends``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from knockout._redact import option_secrets, redact, redact_spec, remember, spec_secrets
from knockout._registry import Registry
from knockout._spec import split_spec
from knockout.errors import ConfigError
from knockout.judges._base import Judge
from knockout.judges._options import JudgeOptions, describe_options, parse_query

JudgeFactory = Callable[[str, Mapping[str, Any]], Judge]

backends: Registry[JudgeFactory] = Registry("judge backend", group="knockout.backends")
backends.add(
    "llamacpp",
    "knockout.judges._llamacpp:LlamaCppJudge",
    "embedded llama-cpp-python with a GGUF shipped by a PyPI package (default)",
)
backends.add(
    "openai",
    "knockout.judges._openai_compat:OpenAIJudge",
    "any OpenAI-compatible server (OpenAI, vLLM, Ollama, llama.cpp server)",
)
backends.add("anthropic", "knockout.judges._anthropic_backend:AnthropicJudge", "Anthropic Messages API")
backends.add("openai-batch", "knockout.judges._batch:OpenAIBatchJudge",
             "OpenAI Batch API: each wave one batch job (resumed by its id, never resubmitted)")
backends.add("anthropic-batch", "knockout.judges._batch:AnthropicBatchJudge",
             "Anthropic Message Batches API: each wave one batch job (resumed by its id)")
backends.add(
    "scripted",
    "knockout.judges._scripted:ScriptedJudge",
    "SIMULATION, not an LLM: human score + seeded noise, for tests and simulations",
)

DEFAULT_JUDGE = "llamacpp"


def parse_spec(spec: str) -> tuple[str, str, dict[str, str]]:
    """Split a judge spec into (backend, model, options) (:mod:`knockout._spec`: the grammar the redaction of
    its secrets reads too).  An error shows the spec redacted."""
    if not spec.strip():
        raise ConfigError("empty judge spec")
    backend, model, query = split_spec(spec)
    remember(spec_secrets(spec))  # scrubbed from what this process stores and prints (knockout._redact)
    shown = redact_spec(spec.strip())
    if re.match(r"^[A-Za-z_][\w-]*=", model):
        raise ConfigError(
            f"judge spec '{shown}': '{redact(model)}' is an option, not a model name; "
            f"options go after '?': {backend}?{redact(model).replace(':', '&')}"
        )
    options = parse_query(query, f"judge spec '{shown}'")
    if backend not in backends:
        known = ", ".join(backends.names())
        raise ConfigError(f"unknown judge backend '{backend}' in spec '{shown}' (known: {known})")
    return backend, model, options


def make_judge(spec: str, options: Mapping[str, Any] | None = None) -> Judge:
    """Build a judge from a spec; optional dependencies are imported only here."""
    from knockout._bounds import MAX_SPEC, valid_unicode

    for what, text in [("judge spec", spec), *(("judge option", str(x)) for kv in (options or {}).items()
                                                for x in kv)]:
        try:
            valid_unicode(text)
        except ValueError as exc:
            raise ConfigError(f"{what} {text[:60]!r}: {exc}") from None
        if len(text) > MAX_SPEC:
            raise ConfigError(f"{what} {text[:60]!r}...: longer than {MAX_SPEC} characters")
    remember(option_secrets({str(k): v for k, v in (options or {}).items()}))
    backend, model, spec_options = parse_spec(spec)
    merged = {**spec_options, **(options or {})}
    try:
        factory = backends.get(backend)
    except ImportError as exc:  # pragma: no cover - depends on installed extras
        raise ConfigError(
            f"judge backend '{backend}' needs an optional dependency ({exc.name}); "
            f"install it with: pip install 'knockout[{backend}]'"
        ) from None
    return factory(model, merged)


def backend_options(backend: str) -> list[dict[str, Any]]:
    """Each option of a backend: name, type, default, constraints and help (``knockout judges``)."""
    factory = backends.get(backend)
    model = getattr(factory, "Options", None)
    if not (isinstance(model, type) and issubclass(model, JudgeOptions)):
        return []
    return describe_options(model)
