"""Secrets out of what knockout prints or logs: the one redaction of judge specs, options and command lines.

A judge spec or option may hold a secret (``openai:m?api_key=sk-...``, ``--judge-opt token=...``, a server
URL with ``user:password@``).  Every place that shows a spec, an option or a command line — the resume line
after a signal, the retry line of an incomplete run, ``knockout runs``, report headers, error messages —
passes it through :func:`redact`, which keeps everything but the secret values.
"""

from __future__ import annotations

import re

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
