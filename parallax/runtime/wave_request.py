"""One request for a wave's votes (`n` choices of one prompt), each still its own vote branch.

See docs/how-it-works.md#votes-in-one-request and docs/internals/model-calls.md.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from typing import Any

import openai
from langchain_core.messages import AIMessage

from parallax.runtime.request_budget import BudgetRefused
from parallax.runtime.retry import TRANSIENT_ERRORS

MAX_CHOICES = 16
"""Most choices one request asks for (OpenAI allows 128; a bigger wave is several requests)."""

Send = Callable[[int, list[str]], Awaitable[tuple[list[AIMessage], int]]]
"""Sends the group's prompt once with up to `n` choices for the seats' branches (whose records carry
its spend); returns the replies the endpoint gave, each with its share of the usage (`share_usage`),
and how many choices were asked (fewer than `n` when the run's budget fits no more:
runtime/request_budget.py)."""


class NotServed(Exception):
    """The request with `n` failed in a way each vote should meet on its own: its seats ask
    alone."""


def refuses_n(exc: BaseException) -> bool:
    """A client error answering a request with `n`: the endpoint does not take it (4xx, not 429)."""
    return isinstance(exc, (openai.BadRequestError, openai.UnprocessableEntityError))


def _split(total: int, weights: list[int]) -> list[int]:
    """`total` in parts proportional to `weights` (equal when they are all 0), summing exactly to
    `total`."""
    n = len(weights)
    if not sum(weights):
        weights = [1] * n
    whole = sum(weights)
    parts = [total * w // whole for w in weights]
    for i in range(total - sum(parts)):  # the remainder, one each, to the first ones
        parts[i % n] += 1
    return parts


LLAMA_CPP_BUILD = re.compile(r"^b\d+-")
"""llama.cpp's server names its build as the `system_fingerprint` ("b<build number>-<commit>",
"b0-unknown" for the embedded default's wheel)."""
CHARS_PER_TOKEN = 4.0
"""For a first choice too short to measure its tokens per character by (under 20 characters)."""


def usage_of_first_choice(replies: list[AIMessage]) -> bool:
    """Whether the request's usage counts only its first choice's completion: llama.cpp's server
    does so when asked for `n` (measured on the embedded default: four requests of 3 choices
    reported 14, 8, 12, 28 completion tokens, each the first choice's own count plus its end token;
    the three choices held 53, 54, 68, 87)."""
    fingerprint = replies[0].response_metadata.get("system_fingerprint") if replies else None
    return (
        len(replies) > 1
        and isinstance(fingerprint, str)
        and LLAMA_CPP_BUILD.match(fingerprint) is not None
    )


def share_usage(replies: list[AIMessage]) -> None:
    """Give each choice its share of the request's usage, in place, so the branches sum to the bill.

    Prompt tokens are split evenly, completion tokens by each choice's length in characters; where
    the usage counts only the first choice's completion (`usage_of_first_choice`), the others get
    its tokens per character (docs/internals/model-calls.md#a-waves-votes-in-one-request).
    """
    if not replies:
        return
    usage: dict[str, Any] = dict(replies[0].usage_metadata or {})
    n = len(replies)
    prompt = _split(int(usage.get("input_tokens", 0) or 0), [1] * n)
    cached = _split(
        int((usage.get("input_token_details") or {}).get("cache_read", 0) or 0), [1] * n
    )
    chars = [len(str(r.content)) for r in replies]
    reported = int(usage.get("output_tokens", 0) or 0)
    if usage_of_first_choice(replies):
        per_char = reported / chars[0] if chars[0] >= 20 else 1 / CHARS_PER_TOKEN
        completion = [reported] + [round(c * per_char) for c in chars[1:]]
    else:
        completion = _split(reported, chars)
    for i, reply in enumerate(replies):
        reply.usage_metadata = {
            "input_tokens": prompt[i],
            "output_tokens": completion[i],
            "total_tokens": prompt[i] + completion[i],
            "input_token_details": {"cache_read": cached[i]},
        }


class WaveRequest:
    """The one request of a group of vote branches (same prompt, model, temperature) and its
    choices."""

    def __init__(
        self,
        seats: list[str],
        support: dict[tuple[str, str], bool],
        on_back: Callable[[list[str]], None] | None = None,
    ) -> None:
        """`seats`: the branch ids of the group's votes (at most MAX_CHOICES); `support`: the
        process's record of which (endpoint, model) take `n` (runtime/services.py); `on_back(branch
        ids)`: called when the choices of the waiting seats have arrived, before any seat reads its
        own (a vote watch then cancels none of them: they came back together)."""
        self.branches, self.seats, self.support, self.on_back = (
            list(seats),
            len(seats),
            support,
            on_back,
        )
        self._task: asyncio.Task[list[AIMessage]] | None = None
        self._taken: set[str] = set()
        self._waiting = 0
        self._next = 0

    def worth_asking(self, key: tuple[str, str]) -> bool:
        """Whether to ask with `n`: two or more seats, on an endpoint (`key`: base URL, model) not
        known to refuse it."""
        return self.seats > 1 and self.support.get(key, True)

    async def _request(self, send: Send, n: int, key: tuple[str, str]) -> list[AIMessage]:
        try:
            replies, asked = await send(n, self.branches)
        except (*TRANSIENT_ERRORS, BudgetRefused):
            # each seat backs off and retries on its own (runtime/retry.py); or no choice fits the
            # run's budget
            raise
        except Exception as exc:
            # anything else (a refusal of `n`, one choice cut at the token limit, which fails the
            # whole parsed response): each seat asks on its own, so one choice's fault is only its
            # own vote's
            if refuses_n(exc):
                self.support[key] = False
            raise NotServed(str(exc)) from exc
        if asked > 1:
            self.support[key] = len(replies) >= asked  # fewer choices than asked: it ignores `n`
        if self.on_back is not None:
            self.on_back(sorted(self._taken))
        return replies

    async def take(self, branch: str, key: tuple[str, str], send: Send) -> AIMessage | None:
        """This branch's choice; None when it must ask on its own (docs/internals/model-calls.md).

        Raises what the request raised when it failed for a reason other than `n` (the seat's
        retries then ask alone), and BudgetRefused when not even one choice fits the run's budget.
        `key`: the endpoint's base URL and the model, under which support for `n` is remembered.
        """
        if branch in self._taken or not self.worth_asking(key):
            return None
        self._taken.add(branch)
        if self._task is None:
            self._task = asyncio.create_task(self._request(send, self.seats, key))
            self._task.add_done_callback(
                _retrieved
            )  # a request nobody awaits any more must not warn
        self._waiting += 1
        try:
            replies = await asyncio.shield(self._task)
        except NotServed:
            return None
        finally:
            self._waiting -= 1
            if self._waiting == 0 and not self._task.done() and len(self._taken) >= self.seats:
                self._task.cancel()  # every seat has left: nobody needs the request any more
        index, self._next = self._next, self._next + 1
        return replies[index].model_copy() if index < len(replies) else None


def _retrieved(task: asyncio.Task[list[AIMessage]]) -> None:
    if not task.cancelled():
        task.exception()


class Seat:
    """One vote branch's place in a `WaveRequest`."""

    def __init__(self, wave: WaveRequest, branch: str) -> None:
        self.wave, self.branch = wave, branch

    async def take(self, key: tuple[str, str], send: Send) -> AIMessage | None:
        return await self.wave.take(self.branch, key, send)
