"""`python -m parallax.runtime.model_server`: the embedded server's child (child.py)."""

from parallax.runtime.model_server.child import main

main()
