"""The logic floor: decisions and steps the nodes share, free of graph wiring.

Vote tally, scoring, slicing, routing rules, branch plans, straggler races, the run's final
status, the operation merge, playbook item selection, task files, and the per-run learning
steps (reflect, curate, evaluate with a solve graph handed in).
"""
