"""Graph wiring only: each module exports `builder` and a compiled `graph`."""
