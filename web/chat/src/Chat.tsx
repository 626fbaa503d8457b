/**
 * One conversation with the chat graph, through langgraph-sdk's `useStream`: it streams each run, keeps the
 * thread's messages and surfaces the run's interrupt. Each reply shows its run in one line (status,
 * confidence, votes) and, for a follow-up, the standalone task it was run as. A `needs_review` run waits
 * for the person's decision, which resumes it with `command: {resume: ...}` and nothing else.
 */
import type { Client, Message } from "@langchain/langgraph-sdk";
import { useStream } from "@langchain/langgraph-sdk/react";
import { type FormEvent, type KeyboardEvent, useEffect, useRef, useState } from "react";

import { type ChatState, type Decision, clip, errorText, isReviewRequest, runInfo, summary, textOf } from "./parallax";
import { Review } from "./Review";

interface Props {
  client: Client;
  assistantId: string;
  threadId: string | null;
  onThreadId: (threadId: string) => void;
  onFinish: () => void;
}

export function Chat({ client, assistantId, threadId, onThreadId, onFinish }: Props) {
  const stream = useStream<ChatState>({
    client,
    assistantId,
    threadId,
    onThreadId,
    fetchStateHistory: false,
    onFinish: () => onFinish(),
  });
  const review = isReviewRequest(stream.interrupt?.value) ? stream.interrupt.value : undefined;
  const end = useRef<HTMLDivElement>(null);
  useEffect(() => {
    end.current?.scrollIntoView({ block: "end" }); // a statement: Chromium's scrollIntoView returns a promise
  }, [stream.messages.length, review]);

  // A new conversation's first message is its title, in the thread's metadata: the thread list reads it there
  // (Aegra's thread search answers without the threads' values).
  const send = (text: string) =>
    stream.submit(
      { messages: [{ type: "human", content: text }] },
      {
        optimisticValues: (prev) => ({ messages: [...(prev.messages ?? []), { type: "human", content: text }] }),
        metadata: threadId ? undefined : { title: clip(text, 80) },
      },
    );
  const decide = (decision: Decision) => stream.submit(undefined, { command: { resume: { decisions: [decision] } } });

  return (
    <main className="chat">
      <div className="messages" aria-live="polite">
        {stream.isThreadLoading && <p className="quiet">Loading the conversation…</p>}
        {stream.messages.map((message, i) => (
          <Bubble key={message.id ?? i} message={message} asked={askedBefore(stream.messages, i)} />
        ))}
        {stream.isLoading && !review && <p className="quiet working">Parallax is working…</p>}
        {review && <Review key={stream.interrupt?.id} request={review} busy={stream.isLoading} onDecide={decide} />}
        {stream.error != null && (
          <p className="error" role="alert">
            {errorText(stream.error)}
          </p>
        )}
        <div ref={end} />
      </div>
      <Composer disabled={stream.isLoading || !!review} waitingForReview={!!review} onSend={send} />
    </main>
  );
}

/** The text of the human message just before message `i`: a reply's task is shown when it differs. */
function askedBefore(messages: Message[], i: number): string | undefined {
  for (let j = i - 1; j >= 0; j--) if (messages[j].type === "human") return textOf(messages[j]).trim();
  return undefined;
}

function Bubble({ message, asked }: { message: Message; asked?: string }) {
  const run = message.type === "ai" ? runInfo(message) : undefined;
  return (
    <div className={`bubble ${message.type}`} data-type={message.type}>
      <div className="text">{textOf(message)}</div>
      {run && (
        <div className="meta" title={run.trace_id ? `trace ${run.trace_id}` : undefined}>
          {summary(run)}
          {run.task && asked && run.task.trim() !== asked && <div className="task">run as: {run.task}</div>}
        </div>
      )}
    </div>
  );
}

function Composer(props: { disabled: boolean; waitingForReview: boolean; onSend: (text: string) => void }) {
  const [text, setText] = useState("");
  const send = (e?: FormEvent) => {
    e?.preventDefault();
    if (props.disabled || !text.trim()) return;
    props.onSend(text.trim());
    setText("");
  };
  const onKey = (e: KeyboardEvent<HTMLTextAreaElement>) => {
    if (e.key === "Enter" && !e.shiftKey && !e.nativeEvent.isComposing) send(e);
  };
  return (
    <form className="composer" onSubmit={send}>
      <textarea aria-label="Message" value={text} onChange={(e) => setText(e.target.value)} onKeyDown={onKey}
                disabled={props.waitingForReview}
                placeholder={props.waitingForReview ? "Answer the review first" : "Ask Parallax… (Enter sends)"}
                rows={2} />
      <button type="submit" disabled={props.disabled || !text.trim()}>Send</button>
    </form>
  );
}
