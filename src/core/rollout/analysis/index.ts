/**
 * Metric analysis for progressive rollouts: named checks in the envconfig (`analysis.checks`),
 * measured one at a time by the rollout engine, which records each measurement and asks
 * {@link judge} whether to go on, stop, or measure again after the check's interval.
 */
export { analysisSectionSchema, analysisCheckSchema, type AnalysisCheck, type AnalysisSection } from "./check-schema.js";
export type { Measurement, Verdict } from "./measurement.js";
export { measure } from "./measure.js";
export { judge, type Judgement } from "./judge.js";
export { analysisVariables, type AnalysisVariable } from "./variables.js";
