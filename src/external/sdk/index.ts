export { serve, type ServeOptions } from "./serve.js";
export { hclogLogger } from "./logger.js";
