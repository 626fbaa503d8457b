from openai import OpenAI
from pydantic import BaseModel

client = OpenAI(base_url="http://127.0.0.1:2026/v1", api_key="key-acme")  # the key names the tenant

reply = client.chat.completions.create(
    model="parallax-vote",
    messages=[{"role": "user", "content": "What is 6 * 7?"}],
    # also min_votes, red_team, playbook, max_replans, max_cost, max_tokens, context
    extra_body={"parallax": {"votes": 5}},
)
print(reply.choices[0].message.content, reply.parallax["status"], reply.parallax["vote_counts"])
print("reason:", reply.parallax["reason"] or "none")


class Invoice(BaseModel):
    vendor: str
    total: float
    paid: bool


typed = client.chat.completions.parse(
    model="parallax-direct",
    messages=[{"role": "user", "content": "ACME Tools invoice, total 1250.50, still due."}],
    response_format=Invoice,
)
print(typed.choices[0].message.parsed)
