import asyncio

from langgraph_sdk import get_client


async def main():
    client = get_client(url="http://127.0.0.1:2026", api_key="key-acme")  # the key names the tenant
    thread = await client.threads.create()
    out = await client.runs.wait(
        thread["thread_id"], "solve", input={"task": "What is 12 * 12?", "mode": "vote"}
    )
    print(out["status"], out["answer"], out["trace_id"])
    print("reason:", out["reason"] or "none", "| vote counts:", out["vote_counts"])


asyncio.run(main())
