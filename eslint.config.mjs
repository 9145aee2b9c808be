// Lint of the web page's own modules (the vendored ones are npm's, not ours).
import js from "@eslint/js";
import globals from "globals";

export default [
  { ignores: ["gateway/static/vendor/**", "node_modules/**", ".venv/**", "test-artifacts/**"] },
  js.configs.recommended,
  {
    files: ["gateway/static/**/*.js"],
    languageOptions: { ecmaVersion: 2023, sourceType: "module", globals: globals.browser },
    rules: {
      "no-unused-vars": ["error", { argsIgnorePattern: "^_" }],
      "prefer-const": "error",
      eqeqeq: "error",
    },
  },
  {
    files: ["scripts/**/*.mjs", "tests/web/**/*.mjs", "tests/e2e/**/*.mjs", "eslint.config.mjs"],
    languageOptions: { ecmaVersion: 2023, sourceType: "module", globals: globals.node },
  },
];
