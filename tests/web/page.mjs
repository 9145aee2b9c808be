// What the page's modules read from the browser, for running them under
// node --test: the API base on <body>, localStorage and the browser's
// language. Installed before the modules are imported (core.js reads the
// API base as it loads), hence their dynamic import() in the tests.

const stored = new Map();

export function installPage({ api = "/api/agent", browserLanguage = "en-GB" } = {}) {
  globalThis.document = { body: { dataset: { api } } };
  globalThis.localStorage = {
    getItem: (key) => (stored.has(key) ? stored.get(key) : null),
    setItem: (key, value) => stored.set(key, String(value)),
    removeItem: (key) => stored.delete(key),
  };
  Object.defineProperty(globalThis, "navigator", {
    value: { language: browserLanguage },
    configurable: true,
    writable: true,
  });
  stored.clear();
}

export const page = (path) => new URL(`../../gateway/static/${path}`, import.meta.url).href;
