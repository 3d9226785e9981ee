"""The teacher's path as a new teacher met it (issue 61 item 6): each friction fixed, tested here."""

from __future__ import annotations


def test_a_similarity_of_zero_is_not_shown_as_a_grade_on_the_scale() -> None:
    """An answer saying nothing beyond its question (similarity 0.000) was shown as "meaning 2.19/4"."""
    from knockout.calibration._trust import trust_tables
    from knockout.methods._kind import readers_words

    nothing = {"judge": 3.0, "meaning": 2.19, "similarity": 0.0, "combined": 2.5, "encoder": "all-minilm-l6-v2",
               "disagree": True}
    words = readers_words(nothing)
    assert "nothing beyond the question" in words and "2.19" not in words
    some = {**nothing, "similarity": 0.42}
    assert "reference 2.19 (similarity 0.420" in readers_words(some)
    section = {"questions": {}, "flagged": {}, "readings": {"a1": nothing},
               "counts": {"needs_expert_questions": 0, "questions": 0}}
    rows = next(t for t in trust_tables(section) if t.title.startswith("two readers")).rows
    assert rows == [["a1", "3.00", "nothing beyond the question", "0.000"]]
