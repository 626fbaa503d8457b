import { Component, type ErrorInfo, type ReactNode, StrictMode } from "react";
import { createRoot } from "react-dom/client";

import { App } from "./App";
import "./style.css";

/** A bug in the page shows itself instead of a blank screen. */
class ShowErrors extends Component<{ children: ReactNode }, { error: Error | null }> {
  state = { error: null as Error | null };

  static getDerivedStateFromError(error: Error) {
    return { error };
  }

  componentDidCatch(error: Error, info: ErrorInfo) {
    console.error(error, info.componentStack);
  }

  render() {
    const { error } = this.state;
    if (!error) return this.props.children;
    return (
      <p className="error" role="alert">
        The page failed: {error.message}. Reload it to go on.
      </p>
    );
  }
}

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <ShowErrors>
      <App />
    </ShowErrors>
  </StrictMode>,
);
