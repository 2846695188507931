// Sends N requests through HAProxy (a new connection each, as separate users would) and prints
// which version answered how many: `node requests.mjs 1000 [header: value]`.
import { request } from "node:http";

const n = Number(process.argv[2] ?? 100);
const [name, value] = (process.argv[3] ?? "").split(/:\s*/);
const get = () =>
  new Promise((resolve) => {
    const req = request({ host: "127.0.0.1", port: 8090, agent: false, headers: name ? { [name]: value } : {} }, (res) => {
      let body = "";
      res.on("data", (d) => (body += d));
      res.on("end", () => resolve(res.statusCode === 200 ? JSON.parse(body).version : `HTTP ${res.statusCode}`));
    });
    req.on("error", (e) => resolve(`error ${e.code ?? e.message}`));
    req.end();
  });
const counts = {};
for (let i = 0; i < n; i++) {
  const v = await get();
  counts[v] = (counts[v] ?? 0) + 1;
}
const line = Object.entries(counts)
  .sort()
  .map(([v, c]) => `${v}: ${c} (${((100 * c) / n).toFixed(1)}%)`)
  .join(", ");
console.log(`${n} requests${name ? ` with ${name}: ${value}` : ""}: ${line}`);
