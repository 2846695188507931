import { stripVTControlCharacters } from "node:util";
import type { DeployView } from "../core/engine/deploy-events.js";
import { deployView } from "./deploy-view.js";
import type { Painter } from "./output/colour.js";

const esc = "\x1b[";
const hideCursor = `${esc}?25l`;
const showCursor = `${esc}?25h`;

/**
 * A deploy's (or a release's) view redrawn in place on a terminal at each event (cursor up over the last drawing,
 * erase below, draw again), as `kubectl argo rollouts get rollout --watch` does. A view taller
 * than the terminal shows its head and its last lines while it is live; the final one is whole.
 */
export class LiveView {
  private drawn = 0;
  private readonly restore = () => {
    this.stream.write(showCursor);
    process.exit(130);
  };

  constructor(
    private readonly stream: NodeJS.WriteStream,
    private readonly paint: Painter,
  ) {
    // Ctrl-C while the cursor is hidden must not leave the terminal without one.
    process.once("SIGINT", this.restore);
  }

  update(d: DeployView): void {
    this.redraw(deployView(d, this.paint));
  }

  finish(d: DeployView): void {
    const last = d.error ? `${this.paint.status(d.status)}: ${d.error.message}` : this.paint.status(d.status);
    this.end([...deployView(d, this.paint), "", last]);
  }

  /** Draws any view (a release's) over the last drawing, cut to the terminal's size. */
  redraw(lines: string[]): void {
    this.draw(this.fit(lines), false);
  }

  /** The last drawing, whole, and the cursor back. */
  end(lines: string[]): void {
    process.removeListener("SIGINT", this.restore);
    this.draw(
      lines.map((l) => this.clip(l)),
      true,
    );
  }

  private draw(lines: string[], final: boolean): void {
    const up = this.drawn > 0 ? `${esc}${this.drawn}A\r` : hideCursor;
    this.stream.write(`${up}${esc}J${lines.join("\n")}\n${final ? showCursor : ""}`);
    this.drawn = lines.length;
  }

  /** Lines never wider than the terminal (a wrapped line would throw the count of lines to go up off). */
  private clip(line: string): string {
    const width = (this.stream.columns || 80) - 1;
    const plain = stripVTControlCharacters(line);
    return [...plain].length <= width ? line : `${[...plain].slice(0, width - 1).join("")}…`;
  }

  private fit(lines: string[]): string[] {
    const clipped = lines.map((l) => this.clip(l));
    const rows = (this.stream.rows || 24) - 1;
    if (clipped.length <= rows) return clipped;
    const tail = clipped.slice(clipped.length - (rows - 2));
    return [clipped[0]!, `  … ${clipped.length - tail.length - 1} lines above`, ...tail];
  }
}
