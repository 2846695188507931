import { InvalidArgumentError } from "commander";

/**
 * `--server` / MANENT_SERVER: an http:// or https:// address. Checked up front because `localhost:8080`
 * parses as a URL with the scheme `localhost:` and would otherwise surface later as an unreachable server.
 */
export function parseServerUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new InvalidArgumentError(`not an address; add http:// or https:// (e.g. http://${raw})`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new InvalidArgumentError(`no http:// or https:// scheme; add http:// or https:// (e.g. http://${raw})`);
  }
  return raw;
}
