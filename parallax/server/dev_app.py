"""The custom HTTP app of `langgraph dev` (langgraph.json `http.app`): the same faces `parallax serve` mounts.

Why not server/app.py itself: that app is Aegra's (its error handler writes Aegra's error JSON,
its /metrics middleware reads Aegra's runs table), and langgraph dev's environment has neither
Aegra nor FastAPI. The faces are plain Starlette apps, so both servers mount the same code.
"""

from starlette.applications import Starlette
from starlette.routing import Mount

from parallax.server import openai_face, timeline_face

app = Starlette(routes=[Mount("/v1", app=openai_face.app), Mount("/timeline", app=timeline_face.app)])
