/**
 * The report of the interop script (sdk/go/cmd/manent-gohost/script.go), as printed by the Go
 * host and as rebuilt by the TypeScript host's run of the same script (tshost-script.ts).
 */
export interface TargetResultJSON {
  host: string;
  status: string;
  details?: Record<string, string>;
  duration_ms?: number;
  error?: string;
}

export interface ResultJSON {
  plugin: string;
  targets: TargetResultJSON[];
  details?: Record<string, string>;
}

export interface ReleaseJSON {
  host: string;
  version: string;
  details?: Record<string, string>;
}

export interface StepJSON {
  name: string;
  result?: ResultJSON | ReleaseJSON[] | Record<string, string> | number | null;
  error?: { code: string; message: string; details?: Record<string, string>; partial_result?: ResultJSON };
  secrets_read: string[];
}

export interface Report {
  plugin: string;
  capabilities: string[];
  steps: StepJSON[];
}

/** The secret value the scripts serve as deploy-key. */
export const scriptSecret = "s3cr3t-value";
export const scriptTargets = ["alpha", "beta", "gamma"] as const;
