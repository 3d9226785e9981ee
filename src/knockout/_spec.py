"""The grammar of a judge spec, ``BACKEND[:MODEL][?name=value&name=value]``: one reading, shared by the judge
that uses a spec (:func:`knockout.judges.parse_spec`) and the redaction that hides its secrets
(:mod:`knockout._redact`), so that what is redacted is exactly what the judge reads."""

from __future__ import annotations

from urllib.parse import parse_qsl

from knockout.errors import ConfigError


def split_spec(spec: str) -> tuple[str, str, str]:
    """``spec`` (stripped) as (backend, model, the option text after the first ``?``)."""
    head, _, query = spec.strip().partition("?")
    backend, _, model = head.partition(":")
    return backend, model, query


def query_pairs(query: str) -> list[tuple[str, str]]:
    """``name=value&name=value`` as its (name, value) pairs, names and values percent-decoded (``+`` a space),
    as the judge reads them; a ValueError where it is no such text."""
    if not query:
        return []
    return parse_qsl(query, keep_blank_values=True, strict_parsing=True)


def parse_query(query: str, what: str) -> dict[str, str]:
    """``key=value&key=value`` (the options after a spec's ``?``), or a ConfigError naming ``what`` (the last
    of two values of one name wins)."""
    try:
        return dict(query_pairs(query))
    except ValueError:
        raise ConfigError(f"{what}: options must look like ?key=value&key=value") from None
