export * from "./drift-record.js";
export * from "./drift-checker.js";
export * from "./drift-scheduler.js";
