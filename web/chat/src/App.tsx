/**
 * The page: where to connect and the user's conversations on the left, the open conversation on the right.
 * One langgraph-sdk `Client` serves both, so the thread list and the chat see the same server as the same caller.
 */
import { Client } from "@langchain/langgraph-sdk";
import { type FormEvent, useEffect, useMemo, useState } from "react";

import { Chat } from "./Chat";
import { type Settings, initialSettings, initialThreadId, remember } from "./settings";
import { Threads } from "./Threads";

export function App() {
  const [settings, setSettings] = useState<Settings>(initialSettings);
  const [threadId, setThreadId] = useState<string | null>(initialThreadId);
  const [finished, setFinished] = useState(0);
  const client = useMemo(
    () => new Client({ apiUrl: settings.apiUrl, apiKey: settings.apiKey || null }),
    [settings.apiUrl, settings.apiKey],
  );
  useEffect(() => {
    remember(settings, threadId);
  }, [settings, threadId]);

  return (
    <div className="app">
      <aside>
        <h1>Parallax chat</h1>
        <Connect
          settings={settings}
          onConnect={(next) => {
            setSettings(next);
            setThreadId(null);
          }}
        />
        <button className="new" onClick={() => setThreadId(null)}>
          New chat
        </button>
        <Threads client={client} assistantId={settings.assistantId} current={threadId}
                 onOpen={setThreadId} refresh={finished} />
      </aside>
      <Chat key={`${settings.apiUrl} ${settings.assistantId} ${settings.apiKey}`} client={client}
            assistantId={settings.assistantId} threadId={threadId} onThreadId={setThreadId}
            onFinish={() => setFinished((n) => n + 1)} />
    </div>
  );
}

function Connect({ settings, onConnect }: { settings: Settings; onConnect: (next: Settings) => void }) {
  const [draft, setDraft] = useState(settings);
  const field = (name: keyof Settings) => ({
    name,
    value: draft[name],
    onChange: (e: { target: { value: string } }) => setDraft({ ...draft, [name]: e.target.value }),
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    onConnect({ ...draft, apiUrl: draft.apiUrl.trim().replace(/\/+$/, ""), assistantId: draft.assistantId.trim() });
  };
  return (
    <form className="connect" onSubmit={submit}>
      <label>
        Server <input {...field("apiUrl")} placeholder="http://127.0.0.1:2024" required />
      </label>
      <label>
        Assistant <input {...field("assistantId")} placeholder="chat" required />
      </label>
      <label>
        API key <input {...field("apiKey")} type="password" placeholder="for parallax serve" autoComplete="off" />
      </label>
      <button type="submit">Connect</button>
    </form>
  );
}
