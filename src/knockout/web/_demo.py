"""A demo store: the bundled demo exam and a few side-by-side pairs, with users to grade them."""

from __future__ import annotations

import secrets
from importlib import resources

from knockout.annotations import Assignments, ExamGrades, PairAnnotations
from knockout.data import load_items
from knockout.data._loaders import load_pairs
from knockout.storage._store import Store
from knockout.web._auth import Accounts

DEMO_PAIRSET = "demo-pairs"
#: user -> (role, exams, pair sets)
DEMO_USERS: dict[str, tuple[str, list[str], list[str]]] = {
    "organizer": ("organizer", [], []),
    "lecturer": ("grader", ["demo-en", "demo-de"], [DEMO_PAIRSET]),
    "annotator2": ("grader", [], [DEMO_PAIRSET]),
    "annotator3": ("grader", [], [DEMO_PAIRSET]),
}


def setup_demo(store: Store) -> dict[str, str]:
    """Import the demo exam and pairs into ``store`` and (re)create the demo users with fresh random
    passwords; returns user -> password."""
    examples = resources.files("knockout.examples") / "demo_exam.jsonl"
    with resources.as_file(examples) as path:
        ExamGrades(store).import_items(load_items(path, "jsonl"))
    pairs_file = resources.files("knockout.web") / "demo_pairs.jsonl"
    with resources.as_file(pairs_file) as path:
        PairAnnotations(store).import_pairs(load_pairs(path), DEMO_PAIRSET, source="demo_pairs.jsonl")
    accounts, assignments = Accounts(store), Assignments(store)
    passwords: dict[str, str] = {}
    for name, (role, exams, pairsets) in DEMO_USERS.items():
        password = secrets.token_urlsafe(9)
        if accounts.user(name) is None:
            accounts.add_user(name, password, role)
        else:
            accounts.set_password(name, password)
        for e in exams:
            assignments.assign(name, "exam", e)
        for p in pairsets:
            assignments.assign(name, "pairset", p)
        passwords[name] = password
    return passwords
