// The interface's language: English strings are the keys, French is looked
// up, the browser's language is the default and the person's choice wins.
import { test, beforeEach } from "node:test";
import assert from "node:assert/strict";
import { installPage, page } from "./page.mjs";

installPage();
const { language, setLanguage, t, tLater } = await import(page("js/i18n.js"));
const { FR } = await import(page("js/fr.js"));

beforeEach(() => installPage());

test("English is the key, its placeholders filled", () => {
  assert.equal(language(), "en");
  assert.equal(t("Model: {model}", { model: "gpt" }), "Model: gpt");
  assert.equal(t("Steps"), "Steps");
});

test("a placeholder without a value is left as written", () => {
  assert.equal(t("Model: {model}", {}), "Model: {model}");
  assert.equal(t("Rename {title}", { title: 0 }), "Rename 0");
});

test("French is looked up and filled the same way", () => {
  setLanguage("fr");
  assert.equal(language(), "fr");
  assert.equal(t("Model: {model}", { model: "gpt" }), FR["Model: {model}"].replace("{model}", "gpt"));
  assert.equal(t("Writing with {model}", { model: "m" }), "Rédaction avec m");
});

test("a string French lacks stays in English", () => {
  setLanguage("fr");
  assert.equal(t("Not a string of the page {x}", { x: 1 }), "Not a string of the page 1");
});

test("the browser's language is the default; a choice overrides it and can be undone", () => {
  installPage({ browserLanguage: "fr-CA" });
  assert.equal(language(), "fr");
  setLanguage("en");
  assert.equal(language(), "en");
  setLanguage("");
  assert.equal(language(), "fr");
  setLanguage("de"); // not offered: back to the browser's
  assert.equal(language(), "fr");
});

test("tLater marks a string without translating it", () => {
  setLanguage("fr");
  assert.equal(tLater("Model: {model}"), "Model: {model}");
});
