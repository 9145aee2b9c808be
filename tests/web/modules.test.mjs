// The page's modules import one another without a cycle (one of them could
// not be read, tested or moved without the other), and the run's step labels
// the engine writes in English reach the page in its language.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { installPage, page } from "./page.mjs";

const root = new URL("../../gateway/static/", import.meta.url);
const modules = ["app.js", ...readdirSync(new URL("js/", root)).map((f) => `js/${f}`)];

function importsOf(file) {
  const code = readFileSync(new URL(file, root), "utf8");
  return [...code.matchAll(/^import\s[^;]*?from\s+"(\.[^"]+)";/gms)]
    .map(([, spec]) => new URL(spec, new URL(file, root)).href.slice(root.href.length))
    .filter((target) => !target.startsWith("vendor/"));
}

test("no module of the page imports itself back, however indirectly", () => {
  const graph = new Map(modules.map((file) => [file, importsOf(file)]));
  const done = new Set();
  const walk = (file, path) => {
    if (path.includes(file)) assert.fail(`import cycle: ${[...path.slice(path.indexOf(file)), file].join(" -> ")}`);
    if (done.has(file)) return;
    for (const next of graph.get(file) ?? []) walk(next, [...path, file]);
    done.add(file);
  };
  for (const file of modules) walk(file, []);
});

test("a step label the page knows is shown in French; an unknown one as it came", async () => {
  installPage();
  const { setLanguage } = await import(page("js/i18n.js"));
  const { stepLabel } = await import(page("js/run-stream.js"));
  assert.equal(stepLabel("Writing with small-model"), "Writing with small-model");
  setLanguage("fr");
  assert.equal(stepLabel("Writing with small-model"), "Rédaction avec small-model");
  assert.match(stepLabel("Reading Ada's thread and memory"), /Ada/);
  assert.notEqual(stepLabel("Reading Ada's thread and memory"), "Reading Ada's thread and memory");
  assert.equal(stepLabel("Something new"), "Something new");
});
