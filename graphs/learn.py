"""The `learn` graph: runs -> traces -> reflections -> operations -> a gated new version.

    start -> next_batch -> [learn_from_task x B] -> consolidate -> gate -> commit -> next_batch ...

Each task of a batch is solved, scored, reflected on and curated in its own branch;
the batch's operations are merged deterministically; the gate accepts the candidate
only if validation accuracy does not fall (and a human agrees, with `approve`).
"""

from __future__ import annotations

from langgraph.graph import END, START, StateGraph

from nodes.commit import commit
from nodes.consolidate import consolidate
from nodes.gate import gate
from nodes.learn_from_task import learn_from_task, learn_from_task_failed
from nodes.schedule import dispatch, next_batch, start
from state.context import Context
from state.learn import LearnInput, LearnOutput, LearnState

builder = StateGraph(LearnState, context_schema=Context, input_schema=LearnInput, output_schema=LearnOutput)
builder.add_node("start", start)
builder.add_node("next_batch", next_batch)
builder.add_node("learn_from_task", learn_from_task, error_handler=learn_from_task_failed)
builder.add_node("consolidate", consolidate, defer=True)
builder.add_node("gate", gate)
builder.add_node("commit", commit)

builder.add_edge(START, "start")
builder.add_edge("start", "next_batch")
builder.add_conditional_edges("next_batch", dispatch, ["learn_from_task", END])
builder.add_edge("learn_from_task", "consolidate")
builder.add_edge("consolidate", "gate")
builder.add_edge("gate", "commit")
builder.add_edge("commit", "next_batch")

graph = builder.compile(name="learn")
