"""Aegra hook (`graphs`): langgraph.json's graphs as served, each counting its runs in /metrics.

Aegra loads this file once per graph id and brings its own checkpointer and store; importing it
changes nothing of Aegra's.
"""

from parallax.graphs.chat import graph as chat_graph
from parallax.graphs.data_loop import feedback as feedback_graph
from parallax.graphs.data_loop import release as release_graph
from parallax.graphs.data_loop import stats as stats_graph
from parallax.graphs.learn import graph as learn_graph
from parallax.graphs.loop import graph as loop_graph
from parallax.graphs.plan import graph as plan_graph
from parallax.graphs.solve import graph as solve_graph
from parallax.server.metrics import with_metrics

solve = with_metrics(solve_graph, "solve")
learn = with_metrics(learn_graph, "learn")
plan = with_metrics(plan_graph, "plan")
stats = with_metrics(stats_graph, "stats")
feedback = with_metrics(feedback_graph, "feedback")
release = with_metrics(release_graph, "release")
chat = with_metrics(chat_graph, "chat")
loop = with_metrics(loop_graph, "loop")
