"""`langgraph dev`'s HTTP app (langgraph.json `http.app`): the same faces `parallax serve` mounts.

Not server/app.py, which is Aegra's: langgraph dev's environment has neither Aegra nor FastAPI, and
the faces are plain Starlette apps.
"""

from starlette.applications import Starlette
from starlette.routing import Mount

from parallax.server import openai_face, timeline_face

app = Starlette(
    routes=[Mount("/v1", app=openai_face.app), Mount("/timeline", app=timeline_face.app)]
)
