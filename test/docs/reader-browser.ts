/**
 * The reader's browser in the sign-in tutorial's test (docs/tutorials/sign-in-oidc.md): what
 * `manent login` opens (as xdg-open), where the reader signs in as the page says (alice, any password)
 * and confirms. A real Chromium on the provider's real pages.
 */
import { launchChromium, signInAtProvider } from "../support/browser.js";

const url = process.argv[2];
if (!url) throw new Error("usage: reader-browser.ts URL");
const { browser, close } = await launchChromium();
try {
  const page = await browser.newPage();
  await page.goto(url);
  await signInAtProvider(page, "alice");
  await page.getByRole("button", { name: "Continue" }).click();
  await page.getByText("sign-in received").waitFor();
} finally {
  await close();
}
