"""Answer groups: a teacher grades a cluster of alike answers once (docs/teacher.md#answer-groups).

* :func:`build_groups` clusters each question's answers by meaning (the meaning reader's embeddings, the
  question's words taken out; near-identical answers always together) with the draft grade as a second axis
  (scikit-learn's agglomerative clustering, the number of groups chosen by silhouette: :mod:`._build`).
* :func:`run_groups` keeps a grade run's groups in its store; :func:`split_group`, :func:`move_out` change them.
* :func:`grade_group`, :func:`override`, :func:`import_group_grades` store the teacher's grades per answer, saying
  which group they came through; :func:`undo` reverts the teacher's latest action.
* :func:`propose` ranks the groups by the expected error a grade would remove (the review queue's next group).
"""

from knockout.groups._build import Group, cluster
from knockout.groups._files import import_group_grades, read_group_grades, sheet_rows
from knockout.groups._propose import propose
from knockout.groups._stored import (
    GroupGrade,
    RunGroups,
    build_groups,
    grade_group,
    move_out,
    override,
    run_for_answers,
    run_groups,
    split_group,
    stored_groups,
    teacher_grades,
    undo,
)

__all__ = ["Group", "GroupGrade", "RunGroups", "build_groups", "cluster", "grade_group", "import_group_grades",
           "move_out", "override", "propose", "read_group_grades", "run_for_answers", "run_groups", "sheet_rows",
           "split_group", "stored_groups", "teacher_grades", "undo"]
