"""The examples that end `--help` of run, learn, serve, feedback and loop, printed as typed.

See docs/internals/cli.md#help-and-errors.
"""

from __future__ import annotations

EXAMPLES: dict[str, tuple[str, ...]] = {
    "run": (
        'parallax run "Is 221 a prime number?" --mode vote --votes 5',
        'parallax run "What is 12 * 12?" --base-url http://localhost:8000/v1 --json',
        'parallax run "Write slugify()" --check "pytest -q" --check-file solution.py',
    ),
    "learn": (
        "parallax learn train.jsonl --val val.jsonl --batch 20 --playbook formula",
        "parallax learn train.jsonl --approve --playbook formula",
        "parallax learn --from-traces --since 7d --playbook formula --limit 200",
    ),
    "feedback": (
        'parallax feedback 3f2a9c1e --score down --comment "wrong unit"',
        'parallax feedback 3f2a9c1e --correct "42"',
    ),
    "loop once": (
        "parallax loop once --playbook formula --share 10",
        "parallax loop once --playbook formula --since 1d --limit 100 --json",
    ),
    "loop status": (
        "parallax loop status --playbook formula",
        "parallax loop status --playbook formula --last 20 --json",
    ),
    "loop install": (
        "parallax loop install --every 1h --api-key key-acme --playbook formula",
        "parallax loop install --every 15m --url http://10.0.0.5:2026 --share 5",
    ),
    "serve": (
        "export DATABASE_URL=postgresql://postgres@127.0.0.1:5432/parallax",
        "export PARALLAX_API_KEYS=key-acme:acme REDIS_URL=redis://127.0.0.1:6379/0",
        "parallax serve --port 2026",
        "parallax serve --host 0.0.0.0 --port 2027    # a second replica",
    ),
}


def epilog(command: str) -> str:
    """`Examples:` and the command's examples, one per line, kept as written by click."""
    lines = "\n".join(f"  {example}" for example in EXAMPLES[command])
    return f"Examples:\n\n\b\n{lines}\n"
