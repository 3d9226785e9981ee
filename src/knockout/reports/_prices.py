"""A price table for judges: what a run cost in money, paid and from scratch.

knockout hard-codes no vendor's prices: the user gives a TOML file (``knockout compare --prices FILE``)::

    # prices per million tokens
    [judges."openai:gpt-4o-mini"]
    input = 0.15
    output = 0.60
    currency = "USD"

    [judges."anthropic:claude-3-5-haiku-latest"]
    input = 0.80
    output = 4.00

A run's judge is looked up by its spec as stored (``knockout runs`` shows it), then by the spec without its
``?options``; a judge that is not in the table has no money figure (shown as ``-``, never as 0).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from knockout._bounds import Name, Number, field_error
from knockout.errors import InputError

Amount = Annotated[Number, Field(ge=0)]


class Price(BaseModel):
    """Price per million input (prompt) and output (completion) tokens."""

    model_config = ConfigDict(extra="forbid")

    input: Amount
    output: Amount
    currency: Name = "USD"

    def of(self, prompt_tokens: int | None, completion_tokens: int | None) -> float | None:
        if prompt_tokens is None or completion_tokens is None:
            return None
        return (prompt_tokens * self.input + completion_tokens * self.output) / 1e6


class PriceTable(BaseModel):
    model_config = ConfigDict(extra="forbid")

    judges: dict[Name, Price] = Field(default_factory=dict)

    def price_for(self, judge: str) -> Price | None:
        return self.judges.get(judge) or self.judges.get(judge.split("?", 1)[0])


def load_prices(path: Path) -> PriceTable:
    """The price table in ``path`` (an :class:`InputError` naming the file, the judge and the field)."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"cannot read the price table ({exc.strerror or exc})", file=str(path)) from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"not a TOML file ({exc})", file=str(path)) from None
    try:
        return PriceTable.model_validate(data)
    except ValidationError as exc:
        loc = [str(x) for x in exc.errors()[0]["loc"]]
        _, msg = field_error(exc)
        record = loc[1] if len(loc) > 2 and loc[0] == "judges" else None
        raise InputError(msg, file=str(path), record=record, field=loc[-1] if loc else None) from None


def money(table: PriceTable | None, judge: str, cost: dict[str, Any]) -> dict[str, Any] | None:
    """What a run's cost (:meth:`knockout.runs.RunKind.cost`) comes to in money: ``paid`` and ``scratch``
    (None where the tokens are unknown), with the currency; None when the judge has no price."""
    price = table.price_for(judge) if table is not None else None
    if price is None:
        return None
    return {"currency": price.currency,
            "paid": price.of(cost.get("prompt_tokens"), cost.get("completion_tokens")),
            "scratch": price.of(cost.get("scratch_prompt_tokens"), cost.get("scratch_completion_tokens"))}
