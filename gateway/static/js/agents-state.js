// What the Agents view's modules share: the registry and models shown, the
// agent open, the thread view chosen and what the viewer holds of it, the
// ask streaming (for Stop), and the caller.

// What the viewer shows of one view (agent and filter) of the thread: its
// entries in order, the token of the page before the oldest shown, and each
// entry's and seam's drawing (entries never change, so a redraw reuses them).
export function threadView(agent = "", filter = { kind: "all", value: "" }) {
  return {
    key: JSON.stringify([agent, filter.kind, filter.value]),
    agent,
    filter,
    threadId: null,
    entries: [],
    older: "",
    segments: [],
    partial: false,
    nodes: new Map(),
    seams: new Map(),
    empty: null,
    loading: null,
    control: null,
    observer: null,
  };
}

export const view = {
  agents: [],
  models: [],
  current: null,
  filter: { kind: "all", value: "" },
  timer: null,
  // The signature of what the thread viewer draws, and what it holds.
  shown: "",
  thread: threadView(),
  live: null,
  me: { user: "", role: "user" },
};
export const POLL_MS = 1500;
