import asyncio
import os

from mcp import Client
from mcp.client.stdio import StdioServerParameters


async def main():
    # the SDK hands a server only a few variables (PATH, HOME, ...): pass on OPENAI_BASE_URL,
    # PARALLAX_* too
    async with Client(
        StdioServerParameters(command="parallax", args=["mcp"], env=dict(os.environ))
    ) as client:
        print(
            [tool.name for tool in (await client.list_tools()).tools]
        )  # ['solve', 'plan', 'feedback']
        run = (
            await client.call_tool(
                "solve", {"task": "What is 12 * 12?", "mode": "vote", "votes": 3}
            )
        ).structured_content
        print(run["status"], run["confidence"], run["answer"], run["trace_id"])
        print("reason:", run["reason"] or "none")
        await client.call_tool("feedback", {"trace_id": run["trace_id"], "score": "up"})


asyncio.run(main())
