import { chromium, type Browser, type Page } from "playwright-core";

/** Debian's Chromium, headless, quiet: no sandbox (root), no GPU, nothing fetched from the network by itself. */
export const chromiumArgs = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/** A real headless Chromium (Debian's, driven by playwright-core); each person gets their own context (`browser.newContext()`), as on their own machine. */
export async function launchChromium(): Promise<{ browser: Browser; close: () => Promise<void> }> {
  const browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    headless: true,
    args: chromiumArgs,
  });
  return { browser, close: () => browser.close() };
}

/** Signs in on the provider's own login page (test/support/oidc-provider.ts), as a person would. */
export async function signInAtProvider(page: Page, login: string, password = "any password"): Promise<void> {
  await page.locator('input[name="login"]').fill(login);
  await page.locator('input[name="password"]').fill(password);
  await page.getByRole("button", { name: "Sign-in" }).click();
}

/**
 * Completes a device sign-in as its person would on another machine: opens the verification page
 * the CLI printed, types the user code, confirms, signs in.
 */
export async function approveDevice(
  browser: Browser,
  verificationUri: string,
  userCode: string,
  login: string,
  /** The person's machine trusts the provider's private CA (a test cannot add it to Chromium's store). */
  opts: { ignoreHTTPSErrors?: boolean } = {},
): Promise<void> {
  const context = await browser.newContext(opts);
  const page = await context.newPage();
  try {
    await page.goto(verificationUri);
    await page.locator('input[name="user_code"]').fill(userCode);
    await page.locator('button[type="submit"]').click();
    // The confirmation page ("Continue"), then the provider's sign-in page.
    await page.getByRole("button", { name: "Continue" }).click();
    await signInAtProvider(page, login);
    // The provider asks a native (public) client's person to confirm the authorization.
    await page.getByRole("button", { name: "Continue" }).click();
    await page.getByRole("heading", { name: "Sign-in Success" }).waitFor();
  } finally {
    await context.close();
  }
}

/**
 * The tokens a public client gets by the device flow when `login` approves it in the browser: what
 * `manent login --device` does, done here by a test acting as the CLI (the CLI's own test runs it).
 */
export async function deviceFlowTokens(
  browser: Browser,
  issuer: string,
  clientId: string,
  login: string,
): Promise<{ idToken: string; refreshToken?: string }> {
  const oidc = await import("openid-client");
  const config = await oidc.discovery(new URL(issuer), clientId, undefined, oidc.None(), { execute: [oidc.allowInsecureRequests] });
  const device = await oidc.initiateDeviceAuthorization(config, { scope: "openid email profile groups offline_access" });
  const polled = oidc.pollDeviceAuthorizationGrant(config, device);
  await approveDevice(browser, device.verification_uri, device.user_code, login);
  const tokens = await polled;
  return { idToken: tokens.id_token!, ...(tokens.refresh_token && { refreshToken: tokens.refresh_token }) };
}
