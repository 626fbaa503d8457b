import asyncio

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

SCHEMA = {"type": "object", "properties": {"total": {"type": "number"}}, "required": ["total"]}


async def main():
    http = httpx2.AsyncClient(headers={"Authorization": "Bearer key-acme"}, timeout=300)
    async with Client(
        streamable_http_client("http://127.0.0.1:2026/mcp", http_client=http)
    ) as client:
        asked = {
            "task": "Invoice 7: total due 41.50 EUR. What is the total?",
            "output_schema": SCHEMA,
        }
        run = (await client.call_tool("solve", asked)).structured_content
        print(run["status"], run["data"], run["trace_id"])
        print("reason:", run["reason"] or "none")


asyncio.run(main())
