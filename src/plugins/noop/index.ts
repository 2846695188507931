export { noopFactory } from "./noop-plugin.js";
