"""Typed judge options: each backend declares a pydantic model, and a spec's ``?key=value`` is checked
against it (unknown names, wrong types and out-of-range values are a :class:`ConfigError` naming
the option and the accepted ones)."""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from knockout._spec import parse_query as parse_query  # the judges' reading of options, one for all
from knockout.errors import ConfigError

OptionsT = TypeVar("OptionsT", bound="JudgeOptions")


class JudgeOptions(BaseModel):
    """Base of every backend's options: unknown names are refused, numbers must be finite."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def normalise_url(url: str) -> str:
    """A server address in one spelling: lower-case scheme and host, no default port, no trailing
    slash (``HTTP://Host:80/v1/`` -> ``http://host/v1``)."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:  # IPv6
        host = f"[{host}]"
    port = parts.port
    netloc = host if port is None or (scheme, port) in (("http", 80), ("https", 443)) else f"{host}:{port}"
    if parts.username:
        netloc = "@" + netloc  # credentials never go into an identity
    return urlunsplit((scheme, netloc, parts.path.rstrip("/"), parts.query, ""))


class ServerOptions(JudgeOptions):
    """Options of the backends that talk to an API server (OpenAI-compatible, Anthropic)."""

    base_url: str | None = Field(
        None, description="server address (else the *_BASE_URL variable, else the vendor's)"
    )
    api_key: SecretStr | None = Field(None, description="API key (else the *_API_KEY variable)")
    timeout: float = Field(
        120.0, gt=0, le=86400, description="seconds per attempt: connection, request and the whole reply"
    )
    retries: int = Field(
        4, ge=0, le=100, description="retries of timeouts, 429, 5xx (by the SDK) and of malformed replies"
    )
    backoff: float = Field(
        0.5, ge=0, le=600, description="seconds before re-asking after a malformed reply, doubled each time"
    )
    concurrency: int = Field(8, ge=1, le=1024, description="requests in flight")

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, v: str | None) -> str | None:
        if v is None:
            return None
        try:
            parts = urlsplit(v.strip())
            parts.port  # noqa: B018 - raises ValueError for a bad port
        except ValueError as exc:
            raise ValueError(f"not a valid URL ({exc})") from None
        if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
            raise ValueError("must be an http:// or https:// URL with a host")
        return v.strip()


def _short(value: object, width: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def validate_options(backend: str, model: type[OptionsT], raw: Mapping[str, Any]) -> OptionsT:
    """``raw`` (strings from a spec, or Python values) as ``model``, or a ConfigError."""
    accepted = ", ".join(model.model_fields) or "none"
    unknown = [k for k in raw if k not in model.model_fields]
    if unknown:
        names = ", ".join(f"'{k}'" for k in unknown)
        plural = "s" if len(unknown) > 1 else ""
        raise ConfigError(f"unknown option{plural} {names} for judge backend '{backend}' (accepted: {accepted})")
    try:
        return model.model_validate(dict(raw))
    except ValidationError as exc:
        err = exc.errors()[0]
        name = str(err["loc"][0]) if err["loc"] else "?"
        message = str(err["msg"]).removeprefix("Value error, ")
        expected = type_name(model.model_fields[name].annotation) if name in model.model_fields else "?"
        got = "" if "api_key" in name else f", got {_short(err.get('input'))}"
        raise ConfigError(
            f"judge option '{name}' of backend '{backend}': {message} (expected {expected}{got})"
        ) from None


def type_name(annotation: Any) -> str:
    """A short readable name of an option's type: ``float``, ``int | None``, ``str (secret)``."""
    if annotation is type(None):
        return "None"
    if annotation is SecretStr:
        return "str (secret)"
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        return " | ".join(type_name(a) for a in typing.get_args(annotation))
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in typing.get_args(annotation))
    return getattr(annotation, "__name__", str(annotation))


def describe_options(model: type[JudgeOptions]) -> list[dict[str, Any]]:
    """Name, type, default and help of each option (for ``knockout judges``)."""
    out = []
    for name, f in model.model_fields.items():
        default = None if f.is_required() else f.get_default(call_default_factory=True)
        if isinstance(default, SecretStr):
            default = "***"
        limits = [f"{k} {getattr(m, k)}" for m in f.metadata for k in ("gt", "ge", "lt", "le") if hasattr(m, k)]
        out.append(
            {
                "name": name,
                "type": type_name(f.annotation),
                "default": default,
                "required": f.is_required(),
                "constraints": ", ".join(
                    s.replace("gt ", "> ").replace("ge ", ">= ").replace("lt ", "< ").replace("le ", "<= ")
                    for s in limits
                ),
                "help": f.description or "",
            }
        )
    return out
