/**
 * What Parallax's `chat` graph says beyond plain messages, typed for the page: the run behind each
 * reply (`response_metadata.parallax`) and the review it asks for when the run ends `needs_review`
 * (nodes/review_answer.py, logic/review_request.py), with the decisions that answer it.
 */
import type { Message } from "@langchain/langgraph-sdk";

/** The chat graph's state, as far as the page reads it. */
export type ChatState = { messages: Message[] };

/** A reply's run: status, confidence, votes, ... (logic/chat_reply.py `SHOWN`, plus the review's outcome). */
export interface RunInfo {
  status?: string;
  confidence?: number;
  mode?: string;
  vote_counts?: Record<string, number> | null;
  trace_id?: string;
  reason?: string | null;
  task?: string;
  review?: "accepted" | "edited" | "rejected";
}

/** The interrupt's value: LangChain's human-in-the-loop request, one `answer` action. */
export interface ReviewRequest {
  action_requests: { name: string; args: { answer?: string }; description?: string }[];
  review_configs: { action_name: string; allowed_decisions: string[] }[];
}

/** What resumes the run: `command: {resume: {decisions: [decision]}}`. */
export type Decision =
  | { type: "approve" }
  | { type: "edit"; edited_action: { name: "answer"; args: { answer: string } } }
  | { type: "reject"; message: string };

export function runInfo(message: Message): RunInfo | undefined {
  const meta = (message as { response_metadata?: Record<string, unknown> }).response_metadata;
  const parallax = meta?.parallax;
  return parallax && typeof parallax === "object" ? (parallax as RunInfo) : undefined;
}

export function isReviewRequest(value: unknown): value is ReviewRequest {
  const v = value as Partial<ReviewRequest> | null;
  return !!v && Array.isArray(v.action_requests) && Array.isArray(v.review_configs);
}

/** A message's text, whether its content is a string or a list of content blocks. */
export function textOf(message: Message): string {
  const content: unknown = message.content;
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .map((block) => (typeof block === "string" ? block : block?.type === "text" ? String(block.text ?? "") : ""))
    .join("");
}

export function clip(text: string, most: number): string {
  return text.length > most ? text.slice(0, most - 1) + "…" : text;
}

/** "status · confidence · votes" in one short line: `ok · 1.00 · 4×3`, `needs_review · 0.40 · 42×2 41×2 40×1`. */
export function summary(run: RunInfo): string {
  const votes = Object.entries(run.vote_counts ?? {})
    .sort(([, a], [, b]) => b - a)
    .map(([answer, n]) => `${clip(answer, 24)}×${n}`)
    .join(" ");
  return [
    run.status ?? "?",
    typeof run.confidence === "number" ? run.confidence.toFixed(2) : null,
    votes || null,
    run.mode ?? null,
    run.review ? `review: ${run.review}` : null,
  ]
    .filter((part) => part !== null)
    .join(" · ");
}

export function approve(): Decision {
  return { type: "approve" };
}

export function edit(answer: string): Decision {
  return { type: "edit", edited_action: { name: "answer", args: { answer } } };
}

export function reject(message: string): Decision {
  return { type: "reject", message };
}

/** A failed call in one line: the server's own message (its JSON's `message` or `detail`) after the HTTP status. */
export function errorText(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const { status, text } = error as Error & { status?: number; text?: string };
  try {
    const body = JSON.parse(text ?? "") as { message?: unknown; detail?: unknown };
    const said = body.message ?? body.detail;
    if (typeof said === "string") return status ? `${status}: ${said}` : said;
  } catch {
    // not JSON: the error's own message below
  }
  return error.message;
}
