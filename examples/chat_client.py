import asyncio

from langgraph_sdk import get_client


async def main():
    client = get_client(url="http://127.0.0.1:2024")
    thread = await client.threads.create()
    said = {"messages": [{"type": "human", "content": "What is 12 * 12?"}]}
    out = await client.runs.wait(thread["thread_id"], "chat", input=said)
    print(out["messages"][-1]["content"], out["messages"][-1]["response_metadata"]["parallax"])
    if out.get("__interrupt__"):  # needs_review: answer the review as Agent Chat UI would
        edit = {"type": "edit", "edited_action": {"name": "answer", "args": {"answer": "144"}}}
        out = await client.runs.wait(
            thread["thread_id"], "chat", command={"resume": {"decisions": [edit]}}
        )
        print("after review:", out["messages"][-1]["content"])


asyncio.run(main())
