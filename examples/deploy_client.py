from langgraph_sdk import get_client

client = get_client(url="http://127.0.0.1:2026", api_key="key-acme")
# thread = await client.threads.create()
# out = await client.runs.wait(thread["thread_id"], "solve", input={"task": "What is 12 * 12?"})
