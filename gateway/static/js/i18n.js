// The interface's language: English strings are the keys, French the
// translation. The browser's language is the default; personalisation can
// override it (kept in localStorage).

import { FR } from "./fr.js";

const STORE = "switchboard.language";

export function language() {
  const chosen = localStorage.getItem(STORE);
  if (chosen === "en" || chosen === "fr") return chosen;
  return (navigator.language || "en").toLowerCase().startsWith("fr") ? "fr" : "en";
}

export function setLanguage(value) {
  if (value === "en" || value === "fr") localStorage.setItem(STORE, value);
  else localStorage.removeItem(STORE);
}

// Marks a string to translate where it is shown (t(variable)), so the
// translation check still finds it.
export const tLater = (text) => text;

export function t(text, vars = {}) {
  const template = (language() === "fr" && FR[text]) || text;
  return template.replace(/\{(\w+)\}/g, (whole, key) => (key in vars ? String(vars[key]) : whole));
}

// The static page: elements marked data-i18n (text), data-i18n-placeholder,
// data-i18n-label (aria-label) and data-i18n-title keep their English text
// as the key.
export function translatePage(root = document) {
  document.documentElement.lang = language();
  for (const node of root.querySelectorAll("[data-i18n]")) {
    node.dataset.i18n ||= node.textContent.trim().replace(/\s+/g, " ");
    node.textContent = t(node.dataset.i18n);
  }
  for (const [attr, key] of [
    ["placeholder", "i18nPlaceholder"],
    ["aria-label", "i18nLabel"],
    ["title", "i18nTitle"],
  ]) {
    const dataAttr = "data-" + key.replace(/[A-Z]/g, (c) => "-" + c.toLowerCase());
    for (const node of root.querySelectorAll(`[${dataAttr}]`)) {
      node.dataset[key] ||= node.getAttribute(attr) || "";
      node.setAttribute(attr, t(node.dataset[key]));
    }
  }
}
