/**
 * The plugin-author API: the contract a plugin implements, the helpers it uses, the error model.
 * Built-in plugins, TypeScript external plugins (`serve`) and tests import from here.
 */
export * from "./core/contract/index.js";
export { Code, ManentError, permanent, isPermanent, type ErrorJSON } from "./core/errors.js";
