"""Secrets out of what knockout stores, prints or logs: the one redaction of judge specs, options and command
lines.

A judge spec or option may hold a secret (``openai:m?api_key=sk-...``, ``--judge-opt token=...``, a server
URL with ``user:password@``).  The judge object keeps it in memory (it is sent to the backend, and is no part
of the judge's identity, so of no cache key); everything else sees :func:`redact`'s text, which keeps all but
the secret values.  It is applied where a spec enters the store and where it is made into a name:

* :class:`knockout.storage.Store` redacts every text a run's row holds (judge, configuration with its command
  line, summary, error, data source), the item sets' sources, the call log's and batch jobs' errors as it
  writes them (:func:`redact_all` for the JSON objects), and schema step 43 redacted what older versions had
  stored; so every reader of a store (``runs``, ``report``, ``export``, ``gradebook``, the web app) shows what
  is stored, and nothing else needs to redact it;
* a jury member's or an experiment judge's label (:meth:`knockout.jury.MemberSpec.label`), which names it in
  tables and in the jury's own judge column, is the redacted spec;
* what is printed without passing through the store: the line that resumes or retries a run (the command
  line), the judge on the progress bar, an error message.
"""

from __future__ import annotations

import re
from typing import Any

#: What stands for a redacted value.
REDACTED = "***"

# ``NAME=VALUE`` where NAME is a secret's name (api_key, key, token, password, secret, or ends in one of
# them: access_token, x_api_key ...); the value ends at ``&``, white space, a quote, a comma or ``;``.
_SECRET_OPTION = re.compile(
    r"(?i)(?<![\w-])((?:[\w-]*[_-])?(?:api[_-]?key|key|token|password|passwd|secret))(=)"
    r"(?!\*\*\*)([^&\s'\",;)]+)"
)
# ``scheme://user:password@host``: the password
# (a scheme starts where no scheme character stands before it: one try per run of letters, linear in the text)
_URL_PASSWORD = re.compile(r"(?i)(?<![a-z0-9+.-])([a-z][a-z0-9+.-]*://[^/\s:@'\"]*):([^/\s@'\"]+)@")


def redact(text: str) -> str:
    """``text`` with the values of secret options (``api_key=``, ``key=``, ``token=``, ``password=``, ...) and
    passwords in URLs (``user:pass@``) replaced by ``***``."""
    if "://" in text and "@" in text:
        text = _URL_PASSWORD.sub(rf"\1:{REDACTED}@", text)
    if "=" in text:
        text = _SECRET_OPTION.sub(rf"\1\2{REDACTED}", text)
    return text


def redact_all(value: Any) -> Any:
    """``value`` (a JSON-like object: dicts, lists, texts, numbers) with :func:`redact` applied to every text in
    it, keys included (what :class:`knockout.storage.Store` writes of a run)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact(k) if isinstance(k, str) else k: redact_all(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_all(v) for v in value]
    return value
