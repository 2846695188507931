// SIGUSR2 resets the tally, SIGUSR1 writes it. Tallies every statement a manent-server sends through pg (its pools and DBOS's), per transaction (bench/deploy-commits.ts).
const { createRequire } = require("node:module");
const fs = require("node:fs");
const req = createRequire(
  require("node:path").join(process.env.COUNT_ROOT || require("node:path").resolve(__dirname, "../.."), "package.json"),
);
const pg = req("pg");
const tally = new Map();
let commits = 0;
const inTx = new WeakMap();
const orig = pg.Client.prototype.query;
const norm = (t) => t.replace(/\s+/g, " ").replace(/"/g, "").slice(0, 110);
pg.Client.prototype.query = function (config, values, cb) {
  const text = typeof config === "string" ? config : config && config.text;
  if (typeof text === "string") {
    const t = text.trim().toUpperCase();
    if (t.startsWith("BEGIN")) {
      inTx.set(this, []);
    } else if (t === "COMMIT" || t === "ROLLBACK") {
      const stmts = inTx.get(this) || [];
      inTx.delete(this);
      commits++;
      const key = "TX[" + stmts.map((s) => s.slice(0, 50)).join(" ; ") + "]";
      tally.set(key, (tally.get(key) || 0) + 1);
    } else if (inTx.has(this)) inTx.get(this).push(norm(text));
    else {
      commits++;
      const k = norm(text);
      tally.set(k, (tally.get(k) || 0) + 1);
    }
  }
  return orig.call(this, config, values, cb);
};
process.on("SIGUSR2", () => {
  tally.clear();
  commits = 0;
});
process.on("SIGUSR1", () => {
  const rows = [...tally].sort((a, b) => b[1] - a[1]).map(([k, v]) => `${String(v).padStart(6)} ${k}`);
  const file = require("node:path").join(process.env.TALLY_DIR || require("node:os").tmpdir(), `manent-tally-${process.pid}.txt`);
  // Written whole, then renamed: a reader waiting for the file never finds half of it.
  fs.writeFileSync(`${file}.part`, `commits ${commits}\n${rows.join("\n")}\n`);
  fs.renameSync(`${file}.part`, file);
});
