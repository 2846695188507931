// Lint: type-aware rules that catch what tsc does not (floating promises, misused promises) and import cycles.
import tseslint from "typescript-eslint";
import importX from "eslint-plugin-import-x";

export default tseslint.config(
  {
    ignores: [
      "dist/**",
      "node_modules/**",
      "src/external/gen/**",
      "bench/support/gen-es/**",
      "sdk/**",
      ".tools/**",
      ".tmp/**",
      "examples/quickstart/work/**",
      "**/*.js",
    ],
  },
  {
    files: ["**/*.ts"],
    extends: [tseslint.configs.base],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    plugins: { "import-x": importX },
    rules: {
      // node:test's describe/it return promises the runner itself awaits.
      "@typescript-eslint/no-floating-promises": [
        "error",
        {
          allowForKnownSafeCalls: [
            {
              from: "package",
              package: "node:test",
              name: ["describe", "it", "test", "suite", "before", "after", "beforeEach", "afterEach"],
            },
          ],
        },
      ],
      "@typescript-eslint/no-misused-promises": ["error", { checksVoidReturn: { arguments: false } }],
      "@typescript-eslint/await-thenable": "error",
      "import-x/no-cycle": ["error", { maxDepth: 10 }],
    },
  },
);
