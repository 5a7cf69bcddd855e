// Drives /docs in headless Chromium (C11): the page lists every operation
// of the OpenAPI document, and "Try it out" on `GET /` runs against the
// public port (which CORS lets the admin port's page call, C8). Prints a
// line of JSON with what it saw; exits 1 on any failure.
//
// Usage: node api-docs-browser.mjs ADMIN_URL SCREENSHOT
import { chromium } from "playwright-core";

const [admin, screenshot] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: "/usr/bin/chromium",
  // No sandbox as root; no calls to Google's services, which this
  // machine's closed network refuses.
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
const seen = {};
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 1600 } });
  const document = await (await fetch(`${admin}/openapi.json`)).json();
  const expected = Object.entries(document.paths)
    .flatMap(([path, item]) => Object.keys(item).map((method) => `${method.toUpperCase()} ${path}`));
  seen.expected = expected.length;

  await page.goto(`${admin}/docs`);
  await page.waitForSelector(".opblock", { timeout: 30000 });
  const shown = await page.$$eval(".opblock-summary", (blocks) => blocks.map((block) => {
    const method = block.querySelector(".opblock-summary-method")?.textContent?.trim();
    const path = block.querySelector(".opblock-summary-path")?.getAttribute("data-path")
      ?? block.querySelector(".opblock-summary-path")?.textContent?.trim();
    return `${method} ${path?.replace(/\u200b/g, "")}`;
  }));
  seen.shown = shown.length;
  const missing = expected.filter((operation) => !shown.includes(operation));
  if (missing.length > 0) throw new Error(`operations not shown: ${missing.join(", ")}`);

  // `GET /`: open it, execute (Try it out is on), read the live response.
  const greeting = page.locator(".opblock-get").filter({
    has: page.locator('.opblock-summary-path[data-path="/"]'),
  }).first();
  await greeting.locator(".opblock-summary").click();
  const execute = greeting.locator("button.execute");
  await execute.waitFor({ timeout: 10000 });
  const [answer] = await Promise.all([
    page.waitForResponse((response) => new URL(response.url()).pathname === "/"
      && new URL(response.url()).origin !== new URL(admin).origin, { timeout: 10000 }),
    execute.click(),
  ]);
  seen.requested = answer.url();
  seen.status = answer.status();
  await greeting.locator(".live-responses-table tr.response .response-col_status").first()
    .waitFor({ timeout: 10000 });
  seen.shownStatus = (await greeting.locator(".live-responses-table tr.response .response-col_status")
    .first().textContent()).trim();
  await page.screenshot({ path: screenshot, fullPage: false });
  if (seen.status !== 200 || seen.shownStatus !== "200") {
    throw new Error(`GET / from the page: ${seen.status}, shown ${seen.shownStatus}`);
  }
  console.log(JSON.stringify(seen));
} catch (error) {
  console.log(JSON.stringify({ ...seen, error: String(error) }));
  process.exitCode = 1;
} finally {
  await browser.close();
}
