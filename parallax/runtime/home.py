"""Where Parallax keeps its data when PARALLAX_HOME does not say: the user's data directory.

See docs/cli.md#where-data-lives.
"""

from __future__ import annotations

from pathlib import Path

from platformdirs import user_data_path

LEGACY = Path(".parallax")


def user_home() -> Path:
    """The platform's per-user data directory for Parallax (not created here)."""
    return user_data_path("parallax", appauthor=False)


def legacy_home() -> Path | None:
    """`./.parallax` when the working folder has one (a home made before the per-user default)."""
    return LEGACY if LEGACY.is_dir() else None


def default_home() -> Path:
    """The home when PARALLAX_HOME is unset: an existing ./.parallax, else the user data
    directory."""
    return legacy_home() or user_home()


def legacy_notice(home: Path, home_is_set: bool) -> str | None:
    """One line for a home found in the working folder: where data now lives and how to move it;
    else None."""
    if home_is_set or home != LEGACY:
        return None
    return (
        f"note: using ./.parallax; Parallax now keeps data in {user_home()}: move it with mkdir -p"
        f" {user_home()} && mv .parallax/* {user_home()}/ (or keep it: PARALLAX_HOME=.parallax)"
    )
