/**
 * The review a `needs_review` run asks for: the answer under review, why the run is unsure, and the
 * decisions the request allows (approve / edit / reject). Editing the answer makes "Save edit" the way on;
 * rejecting takes an optional reason.
 */
import { useState } from "react";

import { type Decision, type ReviewRequest, approve, edit, reject } from "./parallax";

interface Props {
  request: ReviewRequest;
  busy: boolean;
  onDecide: (decision: Decision) => void;
}

export function Review({ request, busy, onDecide }: Props) {
  const action = request.action_requests[0];
  const allowed = request.review_configs.find((c) => c.action_name === action?.name)?.allowed_decisions ?? [];
  const original = action?.args.answer ?? "";
  const [answer, setAnswer] = useState(original);
  const [why, setWhy] = useState("");
  const edited = answer.trim() !== original.trim();

  return (
    <section className="review" aria-label="Review">
      <h2>Review requested</h2>
      {action?.description && <p>{action.description}</p>}
      <label>
        Answer
        <textarea aria-label="Answer under review" value={answer} rows={2} readOnly={!allowed.includes("edit")}
                  onChange={(e) => setAnswer(e.target.value)} />
      </label>
      <div className="actions">
        {allowed.includes("approve") && (
          <button disabled={busy || edited} onClick={() => onDecide(approve())}>Approve</button>
        )}
        {allowed.includes("edit") && (
          <button disabled={busy || !edited || !answer.trim()} onClick={() => onDecide(edit(answer.trim()))}>
            Save edit
          </button>
        )}
      </div>
      {allowed.includes("reject") && (
        <div className="actions">
          <input aria-label="Reason for rejecting" placeholder="Why (optional)" value={why}
                 onChange={(e) => setWhy(e.target.value)} />
          <button className="danger" disabled={busy} onClick={() => onDecide(reject(why.trim()))}>Reject</button>
        </div>
      )}
    </section>
  );
}
