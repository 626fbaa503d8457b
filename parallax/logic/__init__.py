"""The logic floor: decisions and steps the nodes share, free of graph wiring."""
