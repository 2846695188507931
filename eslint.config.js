// Lint: type-aware rules that catch what tsc does not (floating promises, misused promises) and import cycles.
import tseslint from "typescript-eslint";
import importX, { createNodeResolver } from "eslint-plugin-import-x";

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
    settings: {
      // The sources import each other as `./x.js` (NodeNext): resolved to the `.ts` beside them and
      // parsed as modules, or no-cycle finds no local module and so no cycle (it found none before).
      "import-x/extensions": [".ts", ".tsx", ".js"],
      "import-x/resolver-next": [createNodeResolver({ extensionAlias: { ".js": [".ts", ".tsx", ".js"] } })],
    },
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
      // ignoreExternal: a package under node_modules never imports our files, so no cycle passes
      // through one; walking their import graphs was 28 of lint's 88 CPU seconds.
      "import-x/no-cycle": ["error", { maxDepth: 10, ignoreExternal: true }],
    },
  },
  {
    files: ["src/**/*.ts"],
    rules: {
      // DBOS sends what these write to other servers' readers at most once a second, as manent sets
      // its notifier (src/core/engine/dbos-idle-loops.ts): a use of them must shorten that first.
      "no-restricted-properties": [
        "error",
        ...["setEvent", "getEvent", "writeStream", "readStream"].map((property) => ({
          object: "DBOS",
          property,
          message: "its notifications wait up to notificationCoalesceMs (1 s, src/core/engine/dbos-idle-loops.ts): shorten it first",
        })),
      ],
    },
  },
);
