"""Commands of the grading web app: ``serve``, ``users``, ``import``, ``annotations``."""

from __future__ import annotations

import ipaddress
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from knockout.cli._common import err, fail, fmt, options, out, parse_kv, print_json
from knockout.errors import ConfigError, KnockoutError

if TYPE_CHECKING:
    from knockout.storage._store import Store

DbOpt = Annotated[Path, typer.Option("--db", help="the SQLite store (the same file the judges write)")]
JsonOpt = Annotated[bool, typer.Option("--json", help="machine-readable output")]

users_app = typer.Typer(help="Graders and organizers of the web app.", no_args_is_help=True)
annotations_app = typer.Typer(help="Human grades and side-by-side verdicts entered in the web app.",
                              no_args_is_help=True)


def _require_web() -> None:
    try:
        import argon2  # noqa: F401
        import fastapi  # noqa: F401
        import jinja2  # noqa: F401
        import markdown_it  # noqa: F401
    except ImportError as e:
        raise ConfigError(
            f"the web app needs the extra 'web': pip install 'knockout[web]' ({e.name} missing)"
        ) from None


@contextmanager
def opened(db: Path, *, must_exist: bool = True) -> Iterator[Store]:
    from knockout.storage._store import Store

    if must_exist and not db.is_file():
        raise ConfigError(f"store not found: {db}")
    with Store(db) as store:
        yield store


def _read_password(name: str, from_stdin: bool) -> str:
    if from_stdin:
        return sys.stdin.readline().rstrip("\n")
    return str(typer.prompt(f"password for {name}", hide_input=True, confirmation_prompt=True))


# -- serve ----------------------------------------------------------------------------------------
def serve(
    db: Annotated[Path | None, typer.Option("--db", help="the SQLite store (with --demo: default the user "
                                            "cache's web-demo.db)")] = None,
    host: Annotated[str, typer.Option(help="address to bind (loopback by default)")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port")] = 8000,
    demo: Annotated[bool, typer.Option("--demo", help="import the demo exam and pairs and create demo users "
                                       "with fresh passwords (printed)")] = False,
    secure_cookies: Annotated[bool, typer.Option("--secure-cookies", help="mark the cookies Secure (sent over "
                                                 "HTTPS only): behind a TLS reverse proxy")] = False,
    root_path: Annotated[str, typer.Option("--root-path", help="the path prefix the reverse proxy serves the app "
                                           "under, e.g. /grading")] = "",
    trust_proxy: Annotated[bool, typer.Option(
        "--trust-proxy", help="trust the X-Forwarded-For/-Proto headers of a reverse proxy on this machine "
        "(127.0.0.1, ::1); without it or --forwarded-allow-ips the headers are ignored")] = False,
    forwarded_allow_ips: Annotated[str | None, typer.Option(
        "--forwarded-allow-ips", help="addresses of reverse proxies whose X-Forwarded-For/-Proto headers are "
        "trusted (comma-separated, '*' for any; default: none, the headers are ignored)")] = None,
    allowed_origin: Annotated[list[str] | None, typer.Option(
        "--allowed-origin", help="an origin (https://host[:port]) accepted on form posts besides the app's own "
        "(repeatable)")] = None,
    session_hours: Annotated[float, typer.Option(help="how long a login lasts")] = 8.0,
) -> None:
    """Serve the grading and side-by-side annotation web app."""
    try:
        _require_web()
        from knockout.web._deps import WebSettings

        # the options become the app's settings first: a refused value stops here, before any store is opened
        settings = options(WebSettings, secure_cookies=secure_cookies, session_hours=session_hours)
        if db is None:
            if not demo:
                raise ConfigError("give --db STORE (or --demo)")
            from knockout.judges._models import cache_dir

            db = cache_dir() / "web-demo.db"
        if demo:
            from knockout.web._demo import setup_demo

            with opened(db, must_exist=False) as store:
                passwords = setup_demo(store)
            t = Table(title=f"demo users in {db}")
            t.add_column("user")
            t.add_column("password")
            for name, pw in passwords.items():
                t.add_row(name, pw)
            out.print(t)
        elif not db.is_file():
            from knockout.cli._common import knockout_command

            raise ConfigError(f"store not found: {db} (create it with `{knockout_command()} import DATA --db {db}`)")
        if root_path and (not root_path.startswith("/") or root_path.endswith("/")):
            raise ConfigError(f"--root-path must start with '/' and not end with it, got '{root_path}'")
        from knockout.web._app import create_app, origin_of

        origins = tuple(allowed_origin or [])
        bad = [o for o in origins if origin_of(o) is None]
        if bad:
            raise ConfigError(f"--allowed-origin must look like https://host[:port], got '{bad[0]}'")
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = host == "localhost"
        if not loopback and not secure_cookies:
            err.print(f"[yellow]warning:[/] serving on {host} without --secure-cookies: the session cookie may "
                      "travel unencrypted — put the app behind a TLS reverse proxy and pass --secure-cookies.")
        import uvicorn

        proxies = tuple(p.strip() for p in (forwarded_allow_ips or "").split(",") if p.strip())
        if forwarded_allow_ips is not None and not proxies:
            raise ConfigError("--forwarded-allow-ips needs at least one address (or '*')")
        if trust_proxy:
            proxies = tuple(dict.fromkeys((*proxies, "127.0.0.1", "::1")))
        settings = options(WebSettings, secure_cookies=secure_cookies, allowed_origins=origins,
                           session_hours=session_hours, trusted_proxies=proxies)
        out.print(f"knockout grading app on http://{host}:{port}{root_path}/  (Ctrl-C to stop)")
        uvicorn.run(create_app(db, settings), host=host, port=port, log_level="warning", root_path=root_path,
                    proxy_headers=False)  # the app reads the forwarded headers of trusted proxies only
    except KnockoutError as exc:
        fail(exc)


# -- import ---------------------------------------------------------------------------------------
def import_(
    data_paths: Annotated[list[Path], typer.Argument(
        metavar="DATA...", help="item set (any format `knockout grade` reads; several, or a folder of SciEx exams: "
        "one item set) or pairs (meta-evaluation pairwise JSONL, PandaLM JSON, PairItem JSONL)")],
    db: DbOpt,
    kind: Annotated[str, typer.Option(help="auto, items (exam grading) or pairs (side-by-side)")] = "auto",
    fmt_: Annotated[str, typer.Option("--format", help="input format of an item set")] = "auto",
    data_opt: Annotated[list[str] | None, typer.Option("--data-opt", help="loader option key=value")] = None,
    exam: Annotated[str | None, typer.Option(help="exam id for questions without exam_id (default: file "
                                             "stem)")] = None,
    pairset: Annotated[str | None, typer.Option(help="pair set name (default: file stem)")] = None,
    overlap: Annotated[int, typer.Option(help="annotators per pair (new pair sets)")] = 3,
    seed: Annotated[int, typer.Option(help="seed of the per-annotator order and placement")] = 0,
    as_json: JsonOpt = False,
) -> None:
    """Load exams (for grading) or pairs (for side-by-side annotation) into a store."""
    from knockout._bounds import MAX_NAME, ExamName, check_name
    from knockout.annotations import ExamGrades, PairAnnotations, check_overlap
    from knockout.data import is_pair_file, load_item_sets, read_pairs

    try:
        if len(data_paths) > 1 and kind != "items" and any(is_pair_file(p) for p in data_paths):
            raise ConfigError("pairs are imported one file at a time")
        paths, data = data_paths, data_paths[0]
        if kind not in ("auto", "items", "pairs"):
            raise ConfigError(f"--kind must be auto, items or pairs, got '{kind}'")
        as_pairs = kind == "pairs" or (kind == "auto" and fmt_ in ("auto", "metaeval") and is_pair_file(data))
        check_overlap(overlap)
        for option, value, rule in (("--exam", exam, ExamName), ("--pairset", pairset, None)):
            if value is not None:
                check_name(value, option, rule)
        if as_pairs:
            pairs = read_pairs(data)
            from knockout.annotations import check_pairs

            check_pairs(pairs, pairset or data.stem, overlap, str(data))  # before the store: no file on refusal
            with opened(db, must_exist=False) as store:
                name = pairset or data.stem
                annotations = PairAnnotations(store)
                new = annotations.import_pairs(pairs, name, overlap=overlap, seed=seed, source=str(data))
                used = (annotations.pairset(name) or {}).get("overlap")
            result: dict[str, object] = {"pairset": name, "pairs": len(pairs), "new": new, "overlap": used}
            message = f"pair set {name}: {len(pairs)} pairs ({new} new), overlap {used}"
        else:
            items = load_item_sets(paths, fmt_, **parse_kv(data_opt, "--data-opt"))
            if exam is None and any(q.exam_id is None for q in items.questions.values()):
                # the file's stem names the exam: refused here, before the store is opened, like --exam
                check_name(Path(items.source).stem[:MAX_NAME] or "exam", "--exam (default: the file's stem)",
                           ExamName)
            root = Path(os.path.commonpath([os.path.realpath(p if p.is_dir() else p.parent) for p in paths]))
            with opened(db, must_exist=False) as store:
                imported = ExamGrades(store).import_items(items, default_exam=exam, root=root)
            exams = imported.exams
            result = {"exams": exams, "questions": len(items.questions), "answers": len(items)}
            message = f"exams {', '.join(exams)}: {len(items.questions)} questions, {len(items)} answers"
            images = imported.images
            if images.copied or images.skipped:
                result["images"] = {"copied": images.copied, "skipped": images.skipped}
                skipped = ", ".join(f"{n} {why}" for why, n in sorted(images.skipped.items()))
                message += f"; figures: {images.copied} copied into the store's folder" + (
                    f", not served: {skipped}" if skipped else "")
    except KnockoutError as exc:
        fail(exc)
        return
    if as_json:
        print_json(result)
    else:
        out.print(message)


# -- users ----------------------------------------------------------------------------------------
@users_app.command("add")
def users_add(
    name: str,
    db: DbOpt,
    role: Annotated[str, typer.Option(help="grader, organizer (sees everything) or "
                                            "viewer (reads the judge runs only)")] = "grader",
    exam: Annotated[list[str] | None, typer.Option("--exam", help="exam to grade (repeatable)")] = None,
    pairset: Annotated[list[str] | None, typer.Option("--pairset", help="pair set to annotate (repeatable)")] = None,
    password_stdin: Annotated[bool, typer.Option("--password-stdin", help="read the password from the first "
                                                 "line of stdin")] = False,
) -> None:
    """Create a user (the password is asked for, or read from stdin) and assign exams / pair sets."""
    try:
        _require_web()
        from knockout.annotations import Assignments
        from knockout.web._auth import Accounts

        password = _read_password(name, password_stdin)
        Accounts.check_new(name, password, role)  # before the store: a refused command creates no file
        with opened(db, must_exist=False) as store:
            assignments = Assignments(store)
            for e in exam or []:  # checked before the user is created
                assignments.check("exam", e)
            for p in pairset or []:
                assignments.check("pairset", p)
            Accounts(store).add_user(name, password, role)
            for e in exam or []:
                assignments.assign(name, "exam", e)
            for p in pairset or []:
                assignments.assign(name, "pairset", p)
    except KnockoutError as exc:
        fail(exc)
        return
    out.print(f"user {name} ({role}) added")


@users_app.command("assign")
def users_assign(
    name: str,
    db: DbOpt,
    exam: Annotated[list[str] | None, typer.Option("--exam", help="exam (repeatable)")] = None,
    pairset: Annotated[list[str] | None, typer.Option("--pairset", help="pair set (repeatable)")] = None,
    remove: Annotated[bool, typer.Option("--remove", help="take the assignments away instead")] = False,
) -> None:
    """Assign exams or pair sets to a user (or take them away with --remove)."""
    try:
        from knockout.annotations import Assignments
        from knockout.web._auth import Accounts

        with opened(db) as store:
            if Accounts(store).user(name) is None:
                raise ConfigError(f"no user '{name}'")
            assignments = Assignments(store)
            change = assignments.unassign if remove else assignments.assign
            for e in exam or []:
                change(name, "exam", e)
            for p in pairset or []:
                change(name, "pairset", p)
    except KnockoutError as exc:
        fail(exc)


@users_app.command("passwd")
def users_passwd(
    name: str,
    db: DbOpt,
    password_stdin: Annotated[bool, typer.Option("--password-stdin")] = False,
) -> None:
    """Set a new password (every session of the user ends)."""
    try:
        _require_web()
        from knockout.web._auth import Accounts

        with opened(db) as store:
            if Accounts(store).user(name) is None:
                raise ConfigError(f"no user '{name}'")
            ended = Accounts(store).set_password(name, _read_password(name, password_stdin))
    except KnockoutError as exc:
        fail(exc)
        return
    out.print(f"password of {name} changed; {ended} session{'s' if ended != 1 else ''} ended")


@users_app.command("list")
def users_list(db: DbOpt, as_json: JsonOpt = False) -> None:
    """List users with their role and assignments."""
    try:
        from knockout.annotations import Assignments
        from knockout.web._auth import Accounts

        with opened(db) as store:
            assignments = Assignments(store)
            rows = [{"name": u.name, "role": u.role, "exams": assignments.of_user(u.name, "exam"),
                     "pairsets": assignments.of_user(u.name, "pairset")} for u in Accounts(store).users()]
    except KnockoutError as exc:
        fail(exc)
        return
    if as_json:
        print_json(rows)
        return
    t = Table(title=f"users in {db}")
    for col in ("user", "role", "exams", "pair sets"):
        t.add_column(col)
    for r in rows:
        t.add_row(str(r["name"]), str(r["role"]), ", ".join(r["exams"]) or "-", ", ".join(r["pairsets"]) or "-")
    out.print(t)


@users_app.command("remove")
def users_remove(name: str, db: DbOpt) -> None:
    """Remove a user, their assignments and sessions (their grades and verdicts stay in the store)."""
    from knockout.web._auth import Accounts

    try:
        with opened(db) as store:
            Accounts(store).remove_user(name)
    except KnockoutError as exc:
        fail(exc)
        return
    out.print(f"user {name} removed")


# -- annotations ----------------------------------------------------------------------------------
@annotations_app.command("export")
def annotations_export(
    db: DbOpt,
    what: Annotated[str, typer.Option(help="grades (current), history (every save) or verdicts")] = "grades",
    format: Annotated[str, typer.Option("--format", help="csv or jsonl")] = "csv",
    output: Annotated[Path | None, typer.Option("--output", "-O", help="file (default: stdout)")] = None,
) -> None:
    """Export human grades or side-by-side verdicts as CSV or JSONL."""
    from knockout.annotations import export_rows, format_rows
    from knockout.cli._common import check_outputs
    from knockout.data._output import write_output

    try:
        check_outputs(output)
        with opened(db) as store:
            text = format_rows(export_rows(store, what), format)
        if output is None:
            sys.stdout.write(text)
        else:
            write_output(output, text, newline=None)
    except KnockoutError as exc:
        fail(exc)
        return


@annotations_app.command("agreement")
def annotations_agreement(pairset: str, db: DbOpt, as_json: JsonOpt = False) -> None:
    """Cohen's kappa per annotator pair and Fleiss' kappa of a pair set."""
    from knockout.annotations import PairAnnotations

    try:
        with opened(db) as store:
            annotations = PairAnnotations(store)
            if annotations.pairset(pairset) is None:
                raise ConfigError(f"no pair set '{pairset}' (pair sets: "
                                  f"{', '.join(annotations.pairset_ids()) or 'none'})")
            ag = annotations.agreement(pairset)
    except KnockoutError as exc:
        fail(exc)
        return
    if as_json:
        print_json(ag)
        return
    t = Table(title=f"{pairset}: Fleiss' kappa {fmt(ag['fleiss'])} over {ag['fleiss_items']} pairs")
    for col in ("annotator", "annotator", "common", "agreement", "Cohen's kappa"):
        t.add_column(col)
    for c in ag["cohen"]:
        t.add_row(c["a"], c["b"], str(c["n"]), fmt(c["agreement"], 2), fmt(c["kappa"]))
    out.print(t)


@annotations_app.command("overlap")
def annotations_overlap(pairset: str, overlap: int, db: DbOpt) -> None:
    """Set how many annotators judge each pair of a pair set."""
    from knockout.annotations import PairAnnotations

    try:
        with opened(db) as store:
            PairAnnotations(store).set_overlap(pairset, overlap)
    except KnockoutError as exc:
        fail(exc)


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
    app.command("import")(import_)
    app.add_typer(users_app, name="users")
    app.add_typer(annotations_app, name="annotations")
