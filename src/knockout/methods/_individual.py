"""Individual (pointwise) grading: one judge call per answer, in one wave."""

from __future__ import annotations

from knockout.data._records import ItemSet
from knockout.methods._base import AnswerResult, MethodOptions, MethodResult
from knockout.prompts._builder import PromptBuilder, parser_for, reminder_for
from knockout.storage._engine import Engine, Task


class Individual:
    name = "individual"
    prompt_kind = "individual"

    async def run(self, items: ItemSet, engine: Engine, options: MethodOptions) -> MethodResult:
        builder = PromptBuilder(items, "individual", options)
        tasks: list[Task] = []
        meta: list[dict[str, object]] = []
        for a in items:
            q = items.question_of(a)
            t, rendered, shot_ids = builder.individual(a)
            tasks.append(
                Task(
                    messages=rendered.messages,
                    parse=parser_for(t, q.max_points, rendered.shown),
                    reminder=reminder_for(t, q.max_points),
                    hint={"kind": "individual", "max_points": q.max_points, "humans": [a.human_score]},
                    label=a.id,
                )
            )
            meta.append({"prompt": t.name, "shots": shot_ids})
        engine.expect(len(tasks))
        outcomes = await engine.ask_all(tasks)
        results = [
            AnswerResult(
                answer_id=a.id,
                question_id=a.question_id,
                score=float(o.value) if o.valid else None,
                valid=o.valid,
                details={**m, **o.details()},
            )
            for a, o, m in zip(items, outcomes, meta, strict=True)
        ]
        return MethodResult(results)
