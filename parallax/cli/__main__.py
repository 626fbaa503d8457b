"""`python -m parallax.cli` runs the `parallax` command (the console script's twin)."""

from parallax.cli import app

app(prog_name="parallax")
