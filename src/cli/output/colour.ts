import { styleText } from "node:util";

type Colour = "green" | "red" | "yellow" | "cyan" | "gray" | "bold";

/** The colour a status word is shown in: green done, red failed, yellow waiting or undone, cyan running. */
const statusColours: Record<string, Colour> = {
  succeeded: "green",
  deployed: "green",
  unchanged: "green",
  promoted: "green",
  up: "green",
  active: "green",
  ok: "green",
  yes: "green",
  "✓": "green",
  failed: "red",
  start_failed: "red",
  gave_up: "red",
  rolled_back: "yellow",
  reverted: "yellow",
  reverting: "yellow",
  cancelled: "yellow",
  revoked: "yellow",
  expired: "yellow",
  restarting: "yellow",
  no: "red",
  "✗": "red",
  queued: "gray",
  pending: "gray",
  skipped: "gray",
  not_started: "gray",
  stopped: "gray",
  "-": "gray",
  running: "cyan",
  starting: "cyan",
  stepping: "cyan",
  preparing: "cyan",
  deploying_candidate: "cyan",
  promoting: "cyan",
  "…": "cyan",
};

/** Paints words for one stream: colours only where they help (a terminal), never where they would be bytes in a file. */
export interface Painter {
  readonly enabled: boolean;
  /** A status word (or mark) in its colour; an unknown word as it is. */
  status(word: string): string;
  paint(colour: Colour, text: string): string;
}

/**
 * Colour on a terminal (not TERM=dumb), off in a pipe or a file; NO_COLOR (https://no-color.org:
 * set and not empty) and `--no-color` turn it off.
 */
export function colourFor(stream: NodeJS.WriteStream, flag: boolean | undefined, env: NodeJS.ProcessEnv = process.env): Painter {
  const enabled = flag !== false && (env.NO_COLOR === undefined || env.NO_COLOR === "") && stream.isTTY === true && env.TERM !== "dumb";
  return painter(enabled);
}

export function painter(enabled: boolean): Painter {
  // The decision is colourFor's, for the stream written to (styleText would judge process.stdout, and NO_COLOR="" as set).
  const paint = (colour: Colour, text: string) => (enabled && text !== "" ? styleText(colour, text, { validateStream: false }) : text);
  return {
    enabled,
    paint,
    status: (word) => {
      const colour = statusColours[word];
      return colour ? paint(colour, word) : word;
    },
  };
}

/** No colour: for lines that go where colour must not (tests of pipes, JSON). */
export const plain: Painter = painter(false);
