"""Exception types.  Every error a user can cause maps to one clear line and an exit code."""

from __future__ import annotations


class KnockoutError(Exception):
    """Base class for errors the CLI reports as one line."""

    exit_code = 1
    #: the run this error stopped (stored ``failed``), where one had been written
    run_id: str | None = None


class InputError(KnockoutError):
    """Bad input data: names the file, the record (line or id) and the field."""

    exit_code = 2

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        record: str | int | None = None,
        field: str | None = None,
    ) -> None:
        self.message = message
        self.file = file
        self.record = record
        self.field = field
        super().__init__(str(self))

    def __str__(self) -> str:
        where = []
        if self.file is not None:
            where.append(str(self.file))
        if self.record is not None:
            where.append(f"record {self.record}")
        if self.field is not None:
            where.append(f"field '{self.field}'")
        prefix = ": ".join(where)
        return f"{prefix}: {self.message}" if prefix else self.message


class ConfigError(KnockoutError):
    """Bad options: unknown judge spec, unknown preset, bad template, missing extra."""

    exit_code = 2


class JudgeError(KnockoutError):
    """A judge backend failed after its retries."""

    exit_code = 1
    #: the attempts that failed before the backend gave up (where the backend counts them)
    failed_attempts = 0
    #: times the request was sent again after the executor's worker it was on was lost (the Ray executor)
    resent_after_lost_worker = 0
