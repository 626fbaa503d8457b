"""The packages of the wheel, found rather than listed (metadata and package-dir are in
pyproject.toml).

Why a setup.py: graphs/, nodes/, prompts/ and state/ live at the top of the repository and install
as parallax.graphs and so on (pyproject's package-dir). setuptools' `packages.find` reports what it
finds under its own names ("graphs", not "parallax.graphs") and finds parallax.graphs only through
the checkout's symlinks, which an sdist does not keep, so a wheel built from the sdist would lack
them. Here each mapped folder's packages get the `parallax.` prefix, and parallax/'s symlinks to
them are skipped, so a checkout and an sdist yield the same list.
"""

from setuptools import find_packages, setup

MAPPED = ("graphs", "nodes", "prompts", "state")

own = [
    name
    for name in find_packages(include=["parallax", "parallax.*"])
    if name.split(".")[1:2] not in ([folder] for folder in MAPPED)
]
mapped = [
    f"parallax.{name}"
    for name in find_packages(include=[*MAPPED, *(f"{folder}.*" for folder in MAPPED)])
]
setup(packages=sorted(own + mapped))
