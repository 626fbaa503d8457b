from pydantic import BaseModel

import parallax


class Filing(BaseModel):
    revenue: float
    net_income: float


result = parallax.solve(
    document="annual_report.pdf",
    question="What were revenue and net income?",
    mode="section",
    schema=Filing,
)
print(result.status, result.data, result.trace_id)
print("reason:", result.reason or "none")  # why it is not ok, or what the run noticed
for value in result.provenance:  # where each value comes from: its quote and page
    print(value.path, value.value, "page", value.page, repr(value.quote))
