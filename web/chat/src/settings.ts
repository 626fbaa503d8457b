/**
 * Where the page connects: the server's URL and assistant come from the query string (a link can carry
 * them: `?apiUrl=http://127.0.0.1:2024&assistantId=chat&threadId=...`), the API key only from the form,
 * kept in this tab's sessionStorage and never put in the URL. The key is sent as `x-api-key`
 * (`parallax serve` needs it; `langgraph dev` ignores it).
 */
export interface Settings {
  apiUrl: string;
  assistantId: string;
  apiKey: string;
}

const DEFAULTS: Settings = { apiUrl: "http://127.0.0.1:2024", assistantId: "chat", apiKey: "" };
const KEY = "parallax-chat";

function query(): URLSearchParams {
  return new URLSearchParams(window.location.search);
}

export function initialSettings(): Settings {
  let saved: Partial<Settings> = {};
  try {
    saved = JSON.parse(sessionStorage.getItem(KEY) ?? "{}") as Partial<Settings>;
  } catch {
    saved = {};
  }
  const q = query();
  return {
    apiUrl: q.get("apiUrl") ?? saved.apiUrl ?? DEFAULTS.apiUrl,
    assistantId: q.get("assistantId") ?? saved.assistantId ?? DEFAULTS.assistantId,
    apiKey: saved.apiKey ?? DEFAULTS.apiKey,
  };
}

export function initialThreadId(): string | null {
  return query().get("threadId");
}

/** Remember the settings for this tab and show where the page points (and which thread) in its URL. */
export function remember(settings: Settings, threadId: string | null): void {
  sessionStorage.setItem(KEY, JSON.stringify(settings));
  const q = new URLSearchParams({ apiUrl: settings.apiUrl, assistantId: settings.assistantId });
  if (threadId) q.set("threadId", threadId);
  window.history.replaceState(null, "", `${window.location.pathname}?${q}`);
}
