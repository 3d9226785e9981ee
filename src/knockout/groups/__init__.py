"""Answer groups: a teacher grades a cluster of alike answers once (docs/teacher.md#answer-groups).

* :func:`build_groups` clusters each question's answers by meaning (the meaning reader's embeddings, the
  question's words taken out; near-identical answers always together) with the draft grade as a second axis
  (scikit-learn's agglomerative clustering, the number of groups chosen by silhouette: :mod:`._build`).
* :func:`run_groups` keeps a grade run's groups in its store; :func:`split_group`, :func:`move_out` change them.
* :func:`grade_group`, :func:`import_group_grades` store the teacher's grade of a group's representative on it and
  on the members near-identical to it (:func:`alike`), saying which group it came through; the other members keep
  their own drafts, moved by the grade model's adaptation, which the group's grade enters as one judgement;
  :func:`override` grades one answer; :func:`undo` reverts the teacher's latest action.
* :func:`propose` ranks the groups not graded yet (:func:`graded_groups`) by the expected error a grade would
  remove (the review queue's next group).
"""

from knockout.groups._build import Group, cluster
from knockout.groups._files import import_group_grades, read_group_grades, sheet_rows
from knockout.groups._propose import propose
from knockout.groups._stored import (
    GroupGrade,
    RunGroups,
    alike,
    build_groups,
    grade_group,
    graded_groups,
    move_out,
    override,
    run_for_answers,
    run_groups,
    split_group,
    stored_groups,
    teacher_grades,
    undo,
)

__all__ = ["Group", "GroupGrade", "RunGroups", "alike", "build_groups", "cluster", "grade_group", "graded_groups",
           "import_group_grades",
           "move_out", "override", "propose", "read_group_grades", "run_for_answers", "run_groups", "sheet_rows",
           "split_group", "stored_groups", "teacher_grades", "undo"]
