// A node:test reporter for bench/slowest-tests.ts: one JSON line per top-level test or suite that
// ended, with the file it is in and its duration (the runner's own figures).
export default async function* fileTimes(source) {
  for await (const event of source) {
    if ((event.type === "test:pass" || event.type === "test:fail") && event.data.nesting === 0) {
      yield `${JSON.stringify({
        file: event.data.file ?? null,
        name: event.data.name,
        ok: event.type === "test:pass",
        duration_ms: event.data.details?.duration_ms ?? 0,
      })}\n`;
    }
  }
}
