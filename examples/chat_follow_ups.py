import asyncio

from langgraph_sdk import get_client


async def follow_ups():
    client = get_client(url="http://127.0.0.1:2024")
    thread = await client.threads.create()
    for said in ("What is 12 × 12?", "And half of that?"):
        out = await client.runs.wait(
            thread["thread_id"], "chat", input={"messages": [{"type": "human", "content": said}]}
        )
        print(said, "->", out["last_run"]["task"], "->", out["messages"][-1]["content"])


asyncio.run(follow_ups())
