"""Node functions of the Parallax graphs, one concept per module."""
