import asyncio
import os

from mcp import Client
from mcp.client.stdio import StdioServerParameters


async def main():
    # the SDK hands a server only a few variables (PATH, HOME, ...): pass on OPENAI_BASE_URL,
    # PARALLAX_* too
    server = StdioServerParameters(command="parallax", args=["mcp"], env=dict(os.environ))
    async with Client(server) as client:
        tools = (await client.list_tools()).tools
        print([tool.name for tool in tools])  # ['solve', 'plan', 'feedback']
        asked = {"task": "What is 12 * 12?", "mode": "vote", "votes": 3}
        run = (await client.call_tool("solve", asked)).structured_content
        print(run["status"], run["confidence"], run["answer"], run["trace_id"])
        print("reason:", run["reason"] or "none")
        await client.call_tool("feedback", {"trace_id": run["trace_id"], "score": "up"})


asyncio.run(main())
