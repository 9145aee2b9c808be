// Every string of the web page has its French translation: the t("...")
// and tLater("...") keys of gateway/static and the texts and attributes index.html marks with
// data-i18n*. Run by scripts/test.sh.
import { readFileSync, readdirSync } from "node:fs";
import { FR } from "../gateway/static/js/fr.js";

const root = new URL("../gateway/static/", import.meta.url);
const norm = (text) => text.replace(/\s+/g, " ").trim();
const keys = new Set();
const sources = ["app.js", ...readdirSync(new URL("js/", root)).map((f) => `js/${f}`)];
for (const file of sources) {
  const code = readFileSync(new URL(file, root), "utf8");
  for (const [, quoted] of code.matchAll(/\b(?:t|tLater)\(\s*("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')/g))
    keys.add(norm(JSON.parse(quoted.startsWith("'") ? `"${quoted.slice(1, -1).replace(/"/g, '\\"')}"` : quoted)));
  for (const [, label] of code.matchAll(/label: "([^"]+)"/g)) keys.add(label);
}
const html = readFileSync(new URL("index.html", root), "utf8");
for (const [, tag, text] of html.matchAll(/(<[^>]*\sdata-i18n(?=[\s=>/])[^>]*>)([^<]*)</g)) {
  const given = /data-i18n="([^"]+)"/.exec(tag);
  keys.add(norm(given ? given[1] : text));
}
for (const [attr, marker] of [
  ["placeholder", "data-i18n-placeholder"],
  ["aria-label", "data-i18n-label"],
  ["title", "data-i18n-title"],
]) {
  for (const [tag] of html.matchAll(new RegExp(`<[^>]*\\s${marker}(?=[\\s=>/])[^>]*>`, "g"))) {
    const value = new RegExp(`\\b${attr}="([^"]*)"`).exec(tag);
    if (value) keys.add(norm(value[1]));
  }
}
keys.delete("");
const missing = [...keys].filter((key) => !(key in FR));
if (missing.length) {
  console.error(`${missing.length} strings of the web page have no French translation (gateway/static/js/fr.js):`);
  for (const key of missing) console.error(`  ${JSON.stringify(key)}`);
  process.exit(1);
}
console.log(`${keys.size} strings, each translated into French`);
