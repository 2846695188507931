/**
 * An OpenID Connect provider on this machine, to try manent's sign-in (docs/tutorials/sign-in-oidc.md):
 * panva's oidc-provider with three people (alice: deployers, bob: viewers, carol: release-managers
 * and deployers; any password), the web UI's client `manent` (secret `example-client-secret`) and
 * the CLI's public client `manent-cli`. The same provider the tests use (test/support/oidc-provider.ts).
 *
 *     node --import tsx examples/oidc-provider/start.ts [--port 9000] [--issuer-file FILE] [--manent http://127.0.0.1:8080]
 */
import { writeFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import { startOidcProvider } from "../../test/support/oidc-provider.js";

const { values } = parseArgs({
  options: {
    port: { type: "string", default: "0" },
    "issuer-file": { type: "string" },
    manent: { type: "string", default: "http://127.0.0.1:8080" },
  },
});
const provider = await startOidcProvider({
  port: Number(values.port),
  client: { id: "manent", secret: "example-client-secret", redirectUris: [new URL("/auth/callback", values.manent).href] },
});
if (values["issuer-file"]) await writeFile(values["issuer-file"], `${provider.issuer}\n`);
process.stdout.write(`OpenID provider listening on ${provider.issuer} (people: alice, bob, carol; any password)\n`);
for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => void provider.close().then(() => process.exit(0)));
