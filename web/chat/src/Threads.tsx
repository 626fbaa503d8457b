/**
 * The caller's conversations with the assistant, newest first. A thread is found by its metadata: the
 * server stamps `graph_id` (and `assistant_id`) on a thread when a run starts on it, and on `parallax serve`
 * a key sees only its own tenant's threads.
 */
import type { Client, Thread } from "@langchain/langgraph-sdk";
import { useEffect, useState } from "react";

import { type ChatState, clip, errorText, textOf } from "./parallax";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

interface Props {
  client: Client;
  assistantId: string;
  current: string | null;
  onOpen: (threadId: string) => void;
  /** Changes when a run ends, so the list is read again. */
  refresh: number;
}

export function Threads({ client, assistantId, current, onOpen, refresh }: Props) {
  const [threads, setThreads] = useState<Thread<ChatState>[]>([]);
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    let live = true;
    const metadata = UUID.test(assistantId) ? { assistant_id: assistantId } : { graph_id: assistantId };
    client.threads
      .search<ChatState>({ metadata, limit: 50 })
      .then((found) => {
        if (!live) return;
        setThreads([...found].sort((a, b) => b.updated_at.localeCompare(a.updated_at)));
        setError(null);
      })
      .catch((e: unknown) => live && setError(errorText(e)));
    return () => {
      live = false;
    };
  }, [client, assistantId, refresh, current]);

  if (error) return <p className="error">Threads: {error}</p>;
  return (
    <nav className="threads" aria-label="Conversations">
      {threads.length === 0 && <p className="quiet">No conversations yet.</p>}
      {threads.map((thread) => (
        <button key={thread.thread_id} className={thread.thread_id === current ? "thread current" : "thread"}
                title={thread.thread_id} onClick={() => onOpen(thread.thread_id)}>
          <span>{title(thread)}</span>
          <small>
            {new Date(thread.updated_at).toLocaleString()}
            {thread.status === "interrupted" ? " · review" : ""}
          </small>
        </button>
      ))}
    </nav>
  );
}

/** The title the page gave the thread, else its first message (when the server sends values), else its id. */
function title(thread: Thread<ChatState>): string {
  const first = thread.values?.messages?.find((m) => m.type === "human");
  const text = typeof thread.metadata?.title === "string" ? thread.metadata.title : first ? textOf(first) : "";
  return text.trim() ? clip(text.trim(), 60) : `Thread ${thread.thread_id.slice(0, 8)}`;
}
