"""Secrets out of what knockout stores, prints or logs: the one redaction of judge specs, options, server
addresses, command lines and error texts.

A judge spec or option may hold a secret (``openai:m?api_key=sk-...``, ``--judge-opt token=...``, a server URL
with ``user:password@`` or a signed query).  The judge object keeps it in memory (it is sent to the backend,
and is no part of the judge's identity, so of no cache key); everything else sees a redacted text.  Two
redactions, one by structure and one by value:

* **by structure**, :func:`redact_spec`: a spec is read with the judge's own grammar (:mod:`knockout._spec`:
  the option names and values percent-decoded as the judge decodes them), and what the judge would use as a
  secret is ``***``: the value of every option whose decoded name is a secret's (:func:`secret_name`: api_key,
  key, token, password, secret, ... whatever the value holds, however short), and in every value that is a URL
  (:func:`redact_url`) the user information whole, every query parameter but the public ones
  (:data:`PUBLIC_URL_PARAMS`), a query percent-encoded into the path, every path segment a server reads as a
  credential (:func:`_secret_segment`: after a segment named like a secret, ``NAME=VALUE`` or a matrix
  parameter with a secret's name, or shaped like a key: ``sk-...``, ``hf_...``, a long token of letters and
  digits), and the fragment.  In a JSON object (:func:`redact_all`) the value of every field whose name is a
  secret's is hidden whatever its length, and in free text so is a ``"NAME": "VALUE"`` or ``api_key: VALUE``.
  A jury member's or an experiment judge's label (:meth:`knockout.jury.MemberSpec.label`) is its spec so
  redacted; a spec whose options the judge cannot read either shows ``?***``.
* **by value**, :func:`remember` and :func:`scrub`: every judge made in this process (:class:`knockout.judges.Judge`,
  :func:`knockout.judges.make_judge`) gives its secret values (:func:`option_secrets`, :func:`spec_secrets`:
  decoded and as spelled in the spec), and each value of at least :data:`MIN_SECRET` characters is replaced
  by ``***`` wherever it stands, a shorter one (from :data:`MIN_ECHO` characters) wherever it stands as a whole
  token, in any spelling (percent-encoded, JSON- or HTML-escaped): a key a server echoes in an error or a reply,
  however short, a command line that spelled it otherwise.

Where they are applied: :class:`knockout.storage.Store` passes what it writes of a run (judge, configuration
with its command line, summary, error, data source), item-set sources, the call log's and batch jobs' errors
through :func:`redact` (:func:`redact_all` for the JSON objects), and the results, matches and stored replies
through :func:`scrub` (the judges' texts are not rewritten by pattern, only a known secret is taken out); schema
steps 43 and 44 redacted what older versions had stored.  So every reader of a store (``runs``, ``report``,
``export``, ``gradebook``, the web app) shows what is stored, and nothing else needs to redact it.  What is
printed without passing through the store -- the line that resumes or retries a run (the command line, each
argument read as a spec where it is one), an error message -- goes through :func:`redact` too.

:func:`redact` reads free text: each word holding a ``?`` is read as a spec, each URL as a URL, each
``name=value`` whose decoded name is a secret's has its value hidden (also in a text that is not a spec, e.g.
``--judge-opt api%5Fkey=...``), ``Bearer ...`` and ``x-api-key: ...`` lose their token, and every
remembered secret value is scrubbed.
"""

from __future__ import annotations

import html
import json
import re
import shlex
import threading
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote, quote_plus, unquote, unquote_plus, urlsplit

from knockout._spec import query_pairs, split_spec

#: What stands for a redacted value.
REDACTED = "***"
#: Query parameters of a server URL that are no secret (shown as written; every other one is hidden).
PUBLIC_URL_PARAMS = frozenset({"api-version", "api_version"})
#: A remembered secret value of at least this many characters is scrubbed wherever it stands; a shorter one only
#: where it stands as a whole token (not inside a longer word or id: a server's echo ``key 'ab3d9' invalid``).
MIN_SECRET = 8
#: A value shorter than this (one or two characters: ``api_key=k`` for a local server) is no credential and is not
#: scrubbed from free text (it would take letters out of every text); it is hidden in a spec's structure.
MIN_ECHO = 3

# a secret option's name (matched on the decoded name, whole): api_key, key, token, password, secret, or a name
# ending in one of them (access_token, x_api_key ...), credentials, signatures, authorization
_SECRET_NAME = re.compile(
    r"(?i)(?:[\w.-]*[_.-])?(?:api[_-]?key|key|token|password|passwd|pwd|secret|credentials?|sig|signature|"
    r"auth|authorization)")
# ``NAME=VALUE`` in free text (the name maybe percent-encoded: decoded before it is read); the value ends at
# ``&``, white space, a quote, a comma or ``;``
_OPTION = re.compile(r"(?<![\w%.+-])([\w%.+-]+)=(?!\*\*\*)([^&\s'\",;]+)")
# a URL in free text (a scheme starts where no scheme character stands before it: one try per run of letters)
_URL = re.compile(r"(?i)(?<![a-z0-9+.-])[a-z][a-z0-9+.-]*://[^\s'\"<>]+")
# tokens a server or a header holds
_BEARER = re.compile(r"(?i)\b(bearer|basic|x-api-key:|api-key:)(\s+)(?!\*\*\*)([^\s'\",;]+)")
# ``"NAME": "VALUE"`` (a JSON body a server echoes), ``NAME: VALUE`` (a header, YAML): the value of a secret's name
_FIELD = re.compile(r"""(["']?)([\w.-]+)\1(\s*:\s*)(["']?)(?!\*\*\*)([^\s"',;}]+)\4""")
# a query percent-encoded (once or more) into a URL's path: its ``?`` or ``#``
_ENCODED_QUERY = re.compile(r"(?i)%(?:25)*(?:3f|23)")
_PARAM_NAME = re.compile(r"[A-Za-z_][\w.-]{0,23}")
_WORD = re.compile(r"[^\s'\"]+")


# a path segment shaped like a credential: a known key prefix (OpenAI, Anthropic, GitHub, Slack, Google, Hugging
# Face, Groq, AWS ...), a hex or UUID token of 24 characters or more, or a base64url token of 32 or more holding
# letters and digits; a model name (``Llama-3.1-8B-Instruct``, ``Qwen2-7B-Instruct-GPTQ-Int4``) is none of them
_KEY_PREFIX = re.compile(r"(?i)(?:sk|pk|rk|ak)[-_]|sk-ant-|gh[pousr]_|github_pat_|xox[abpors]-|AIza|hf_|gsk_|key[-_]"
                         r"|tok[-_]|AKIA|ASIA")
_KEY_SHAPED = re.compile(r"(?=(?:[^0-9]*[0-9]){4})[0-9a-fA-F-]{24,}"
                         r"|(?=(?:[^0-9]*[0-9]){2})(?=[^A-Za-z]*[A-Za-z])[A-Za-z0-9_-]{32,}")


def _secret_segment(segment: str, before: str | None) -> bool:
    """Whether a URL path segment is one a server reads as a credential: it follows a segment named like a secret
    (``/key/VALUE``, ``/token/VALUE``), is ``NAME=VALUE`` or ``NAME:VALUE`` with a secret's name, or is shaped like
    a key (:data:`_KEY_PREFIX`, :data:`_KEY_SHAPED`)."""
    seg = unquote(segment)
    if not seg or seg == REDACTED:
        return False
    if before is not None and secret_name(unquote(before)):
        return True
    for piece in seg.split(";"):  # matrix parameters: ``v1;api_key=VALUE``
        name, sep, _ = piece.replace(":", "=", 1).partition("=")
        if sep and secret_name(name):
            return True
    return _KEY_PREFIX.match(seg) is not None or _KEY_SHAPED.fullmatch(seg) is not None


def _redact_path(path: str) -> str:
    """``path`` with each segment a server reads as a credential (:func:`_secret_segment`) as ``***``."""
    parts = path.split("/")
    out = [REDACTED if i and _secret_segment(p, parts[i - 1] if i > 1 else None) else p for i, p in enumerate(parts)]
    return "/".join(out)


def path_secrets(path: str) -> set[str]:
    """The credential segments of a URL path (as written and decoded)."""
    parts = path.split("/")
    return {v for i, p in enumerate(parts) if i and _secret_segment(p, parts[i - 1] if i > 1 else None)
            for v in (p, unquote(p))}


def secret_name(name: str) -> bool:
    """Whether an option or query parameter named ``name`` (decoded) holds a secret."""
    return _SECRET_NAME.fullmatch(name.strip()) is not None


# -- by structure ----------------------------------------------------------------------------------------


def _url_parts(url: str) -> tuple[str, str, str, str, str] | None:
    try:
        p = urlsplit(url)
    except ValueError:
        return None
    return p.scheme, p.netloc, p.path, p.query, p.fragment


def redact_url(url: str) -> str:
    """``url`` with its user information whole (``***@host``), the value of every query parameter but the
    public ones (:data:`PUBLIC_URL_PARAMS`), a query percent-encoded into its path and its fragment as ``***``;
    ``url`` itself where it holds none of them."""
    parts = _url_parts(url)
    if parts is None:
        return REDACTED
    scheme, netloc, path, query, fragment = parts
    changed = False
    if "@" in netloc:
        netloc = f"{REDACTED}@{netloc.rpartition('@')[2]}"
        changed = True
    if (m := _ENCODED_QUERY.search(path)) is not None and path[m.end():] != REDACTED:
        path = path[:m.end()] + REDACTED
        changed = True
    if (hidden := _redact_path(path)) != path:
        path = hidden
        changed = True
    if query:
        kept = _redact_url_query(query)
        changed = changed or kept != query
        query = kept
    if fragment and fragment != REDACTED:
        fragment = REDACTED
        changed = True
    if not changed:
        return url
    return (f"{scheme}:" if scheme else "") + (f"//{netloc}" if netloc or url.startswith(f"{scheme}://") else "") \
        + path + (f"?{query}" if query else "") + (f"#{fragment}" if fragment else "")


def _redact_url_query(query: str) -> str:
    out = []
    for seg in query.split("&"):
        raw_name, eq, _ = seg.partition("=")
        name = unquote_plus(raw_name)
        if eq and name.lower() in PUBLIC_URL_PARAMS:
            out.append(seg)
        elif eq and _PARAM_NAME.fullmatch(name):
            out.append(f"{raw_name}={REDACTED}")
        elif seg:
            out.append(REDACTED)
    return "&".join(out)


def _url_like(value: str) -> bool:
    return "://" in value or "@" in value


def _quote_value(value: str) -> str:
    """A decoded option value written back into a spec (what would split it percent-encoded)."""
    return quote(value, safe=":/?=@!$'()*,;[]~+")


def redact_spec(spec: str) -> str:
    """A judge spec with every secret the judge would read from it as ``***`` (module doc): read with the
    judge's grammar (:mod:`knockout._spec`); the options the judge cannot read are hidden whole."""
    if "?" not in spec:
        return _URL.sub(lambda m: redact_url(m.group(0)), spec) if "://" in spec else spec
    head, _, query = spec.partition("?")
    if "://" in head:
        head = _URL.sub(lambda m: redact_url(m.group(0)), head)
    return f"{head}?{_redact_query(query, strict=True)}"


def _redact_query(query: str, *, strict: bool) -> str:
    """The options after a spec's ``?``, their secrets hidden; where they cannot be read: ``***`` (``strict``)
    or ``query`` itself."""
    try:
        pairs = query_pairs(query)
    except ValueError:
        return REDACTED if strict else query
    out = []
    # the segments the parser read, each beside its reading
    for seg, (name, value) in zip(query.split("&") if query else [], pairs, strict=True):
        raw_name = seg.partition("=")[0]
        if secret_name(name):
            out.append(f"{raw_name}={REDACTED}")
        elif _url_like(value):
            hidden = redact_url(value)
            out.append(seg if hidden == value else f"{raw_name}={_quote_value(hidden)}")
        else:
            out.append(seg)
    return "&".join(out)


def url_secrets(url: str) -> set[str]:
    """The secret parts of a server URL, as written and decoded: its user information (whole, user name and
    password), the values of its query parameters but the public ones, a query encoded into its path, its
    fragment."""
    found: set[str] = set()
    parts = _url_parts(url)
    if parts is None:
        return {url}
    _, netloc, path, query, fragment = parts
    if "@" in netloc:
        info = netloc.rpartition("@")[0]
        user, _, password = info.partition(":")
        found |= {info, user, password, unquote(info), unquote(user), unquote(password)}
    if (m := _ENCODED_QUERY.search(path)) is not None:
        tail = path[m.end():]
        found.add(tail)
        decoded = tail
        for _ in range(4):  # each level of encoding
            decoded = unquote(decoded)
            found.add(decoded)
        found |= _query_secrets(decoded.replace("#", "&"))
    found |= path_secrets(path)
    if query:
        found |= _query_secrets(query)
    if fragment:
        found |= {fragment, unquote(fragment)}
    return {s for s in found if s}


def _query_secrets(query: str) -> set[str]:
    found: set[str] = set()
    for seg in query.split("&"):
        raw_name, eq, raw_value = seg.partition("=")
        if eq and unquote_plus(raw_name).lower() in PUBLIC_URL_PARAMS:
            continue
        value = raw_value if eq else seg
        found |= {value, unquote_plus(value), unquote(value)}
    return found


def option_secrets(options: Mapping[str, Any]) -> set[str]:
    """The secret values among judge options (name -> value, as given or validated): every value of a secret
    option (a pydantic ``SecretStr`` or a :func:`secret_name`), the secret parts of every URL value."""
    found: set[str] = set()
    for name, value in options.items():
        if hasattr(value, "get_secret_value"):
            value = value.get_secret_value()
            if isinstance(value, str):
                found.add(value)
            continue
        if not isinstance(value, str):
            continue
        if secret_name(str(name)):
            found.add(value)
        elif _url_like(value):
            found |= url_secrets(value)
    return {s for s in found if s}


def spec_secrets(spec: str) -> set[str]:
    """The secret values of a judge spec, decoded as the judge reads them and as spelled in the spec (the
    options of a spec the judge cannot read: all of them)."""
    _, _, query = split_spec(spec)
    found: set[str] = set()
    if "://" in spec.partition("?")[0]:
        for m in _URL.finditer(spec.partition("?")[0]):
            found |= url_secrets(m.group(0))
    try:
        pairs = query_pairs(query)
    except ValueError:
        return found | {query}
    for seg, (name, value) in zip(query.split("&") if query else [], pairs, strict=True):
        raw_value = seg.partition("=")[2]
        if secret_name(name):
            found |= {value, raw_value}
        elif _url_like(value):
            found |= url_secrets(value) | url_secrets(raw_value)
    return {s for s in found if s}


def argv_secrets(argv: str | Iterable[str]) -> set[str]:
    """The secret values in a command line (a text, split as a shell would, or its arguments): the specs
    among its arguments (``--judge SPEC``, ``--judge=SPEC``) and its ``--judge-opt NAME=VALUE``."""
    if isinstance(argv, str):
        try:
            args = shlex.split(argv)
        except ValueError:
            args = argv.split()
    else:
        args = list(argv)
    found: set[str] = set()
    for arg in args:
        value = arg.partition("=")[2] if arg.startswith("--") and "=" in arg else arg
        if "?" in value or "://" in value:
            found |= spec_secrets(value)
        name, eq, v = value.partition("=")
        if eq and secret_name(unquote_plus(name)):
            found.add(v)
    return {s for s in found if s}


# -- by value --------------------------------------------------------------------------------------------

_lock = threading.Lock()
_known: frozenset[str] = frozenset()
_short: frozenset[str] = frozenset()
_pattern: re.Pattern[str] | None = None


def _spellings(value: str) -> set[str]:
    return {value, quote(value, safe=""), quote_plus(value, safe=""), quote(value),
            json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1], html.escape(value)}


def remember(values: Iterable[str]) -> None:
    """Scrub ``values`` (secrets of a judge made in this process) from every text :func:`redact` and
    :func:`scrub` see from now on: one of at least :data:`MIN_SECRET` characters wherever it stands, a shorter
    one (from :data:`MIN_ECHO` characters) wherever it stands as a whole token."""
    global _known, _short, _pattern
    spelled = {s for v in values if isinstance(v, str) and v != REDACTED for s in _spellings(v) if len(s) >= MIN_ECHO}
    long_ = {s for s in spelled if len(s) >= MIN_SECRET}
    short = spelled - long_
    if long_ <= _known and short <= _short:
        return
    with _lock:
        _known = _known | long_
        _short = _short | short
        _pattern = None


def known_secrets() -> frozenset[str]:
    """The secret values (in each spelling) :func:`scrub` takes out."""
    return _known | _short


def _compile(long_: Iterable[str], short: Iterable[str]) -> re.Pattern[str] | None:
    alts = []
    if long_:
        alts.append("|".join(map(re.escape, sorted(long_, key=len, reverse=True))))
    if short:  # a short secret only as a token: "abc12" in "key abc12 invalid", not inside "abc123x"
        alts.append(r"(?<![\w-])(?:" + "|".join(map(re.escape, sorted(short, key=len, reverse=True)))
                    + r")(?![\w-])")
    return re.compile("|".join(alts)) if alts else None


def scrub(text: str, secrets: Iterable[str] | None = None) -> str:
    """``text`` with every remembered secret value (or every one of ``secrets``) replaced by ``***``: those of
    at least :data:`MIN_SECRET` characters wherever they stand, shorter ones as whole tokens."""
    global _pattern
    if secrets is not None:
        spelled = {s for v in secrets if v != REDACTED for s in _spellings(v) if len(s) >= MIN_ECHO}
        pat = _compile({s for s in spelled if len(s) >= MIN_SECRET}, {s for s in spelled if len(s) < MIN_SECRET})
        return text if pat is None else pat.sub(REDACTED, text)
    if not _known and not _short:
        return text
    pattern = _pattern
    if pattern is None:
        with _lock:
            pattern = _pattern = _compile(_known, _short)
    return text if pattern is None else pattern.sub(REDACTED, text)


def scrub_all(value: Any, secrets: Iterable[str] | None = None) -> Any:
    """``value`` (a JSON-like object) with :func:`scrub` applied to every text in it, keys included."""
    if secrets is None and not _known and not _short:
        return value
    if secrets is not None:
        secrets = list(secrets)
    if isinstance(value, str):
        return scrub(value, secrets)
    if isinstance(value, dict):
        return {scrub(k, secrets) if isinstance(k, str) else k: scrub_all(v, secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub_all(v, secrets) for v in value]
    return value


# -- free text -------------------------------------------------------------------------------------------


def _option(m: re.Match[str]) -> str:
    return f"{m.group(1)}={REDACTED}" if secret_name(unquote_plus(m.group(1))) else m.group(0)


def _word(m: re.Match[str]) -> str:
    word = m.group(0)
    head, q, query = word.partition("?")
    if not q or "://" in head or "=" not in query:
        return word
    return f"{head}?{_redact_query(query, strict=False)}"


def redact(text: str) -> str:
    """``text`` with its secrets as ``***``: each word that is a spec read as one (:func:`redact_spec`), each URL
    (:func:`redact_url`), each ``name=value`` whose decoded name is a secret's, ``Bearer`` tokens, and every
    remembered secret value (:func:`scrub`, first: a value is found whole before a pattern cuts it)."""
    text = scrub(text)
    if "?" in text:
        text = _WORD.sub(_word, text)
    if "://" in text:
        text = _URL.sub(lambda m: redact_url(m.group(0)), text)
    if "=" in text:
        text = _OPTION.sub(_option, text)
    if " " in text:
        text = _BEARER.sub(rf"\1\2{REDACTED}", text)
    if ":" in text:
        text = _FIELD.sub(_field, text)
    return text


#: secret names read unquoted before a colon (``Password: ...``); a bare ``key:`` or ``token:`` in prose (``Answer
#: key: ...``) is read only quoted (``"key": "..."``, a JSON body) or compound (``api_key:``, ``x-auth-token:``)
_UNQUOTED_FIELDS = frozenset({"authorization", "password", "passwd", "apikey", "secret"})


def _field(m: re.Match[str]) -> str:
    q, name, colon, vq, value = m.groups()
    if not secret_name(name) or value.startswith("//"):
        return m.group(0)
    if not q and not any(c in name for c in "_.-") and name.lower() not in _UNQUOTED_FIELDS:
        return m.group(0)
    return f"{q}{name}{q}{colon}{vq}{REDACTED}{vq}"


def redact_arg(arg: str) -> str:
    """One argument of a command line: a spec (``SPEC`` or ``--option=SPEC``: it holds a ``?``) redacted whole by
    its structure (:func:`redact_spec`), any other as free text (:func:`redact`)."""
    prefix, eq, value = arg.partition("=") if arg.startswith("--") else ("", "", arg)
    if "?" in value and not value.startswith("-"):
        return prefix + eq + redact_spec(scrub(value))
    return redact(arg)


def redact_all(value: Any) -> Any:
    """``value`` (a JSON-like object: dicts, lists, texts, numbers) with :func:`redact` applied to every text in
    it, keys included (what :class:`knockout.storage.Store` writes of a run)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact(k) if isinstance(k, str) else k:
                REDACTED if isinstance(k, str) and isinstance(v, str) and v and secret_name(k) else redact_all(v)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_all(v) for v in value]
    return value
