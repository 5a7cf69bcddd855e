// Drives the change feed (C14) in headless Chromium: a page of the
// service's own origin follows `new EventSource("/items")` while the page
// writes items with `fetch`, the service is stopped with SIGTERM (its
// drain ends the stream), one item is written by another instance on the
// same SQLite file while the page's instance is down, and the service
// starts again on the same port. The browser reconnects by itself, with
// `Last-Event-ID`, and the page must have seen every change exactly once,
// in commit order, with no `reset`.
//
// The script that starts this one (change-feed-browser.sh) owns the
// service's processes. This script asks it for each step with a line on
// stdout and waits for its answer on stdin:
//   stop     -> "stopped"             (SIGTERM, the process exited 0)
//   write    -> "written {json}"      (a second instance on the same file,
//                                      another port, made one item, stopped)
//   restart  -> "started"             (the service again, same port and file)
// and ends with "result {json}": what it saw, and `error` when a check
// failed (then it exits 1).
//
// Usage: node change-feed-browser.mjs BASE_URL ARTIFACTS_DIR
import { writeFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { chromium } from "playwright-core";

const [base, artifacts] = process.argv.slice(2);
const answers = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const seen = { steps: [] };
const started = Date.now();

/** Asks the shell script for `step`; resolves to its answer's line. */
async function ask(step, expected) {
  console.log(step);
  const { value, done } = await answers.next();
  if (done) throw new Error(`no answer to "${step}": the script's side ended`);
  if (!value.startsWith(expected)) throw new Error(`"${step}" answered "${value}"`);
  seen.steps.push({ step, at_ms: Date.now() - started });
  return value.slice(expected.length).trim();
}

/** Polls `condition` (a function of the page) until it holds. */
async function until(page, what, condition, argument, timeout = 15000) {
  try {
    await page.waitForFunction(condition, argument, { timeout, polling: 50 });
  } catch {
    const state = await page.evaluate(() => window.feed.summary());
    throw new Error(`timed out after ${timeout} ms waiting for ${what}; page: ${JSON.stringify(state)}`);
  }
}

/** The first frame of a stream opened outside the browser: what `retry:`
 * the service tells clients, and where the stream begins. */
async function opening() {
  const controller = new AbortController();
  const response = await fetch(`${base}/items`, {
    headers: { accept: "text/event-stream" },
    signal: controller.signal,
  });
  const reader = response.body.getReader();
  let text = "";
  while (!text.includes("\n\n")) {
    const { value, done } = await reader.read();
    if (done) break;
    text += new TextDecoder().decode(value);
  }
  controller.abort();
  return { status: response.status, type: response.headers.get("content-type"), frame: text.split("\n\n")[0] };
}

const browser = await chromium.launch({
  executablePath: "/usr/bin/chromium",
  // No sandbox as root; no calls to Google's services, which this
  // machine's closed network refuses.
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
let page;
try {
  seen.opening = await opening();
  const retry = /^retry: (\d+)$/m.exec(seen.opening.frame);
  if (seen.opening.status !== 200 || !retry || !/^id: \S+$/m.test(seen.opening.frame)) {
    throw new Error(`the stream's opening frame: ${JSON.stringify(seen.opening)}`);
  }
  seen.retry_ms = Number(retry[1]);

  page = await browser.newPage({ viewport: { width: 1000, height: 700 } });
  // Every request for the feed the browser makes, with its Last-Event-ID.
  seen.feed_requests = [];
  page.on("request", async (request) => {
    if (request.resourceType() !== "eventsource") return;
    const at = Date.now() - started;
    const headers = await request.allHeaders();
    seen.feed_requests.push({ at_ms: at, last_event_id: headers["last-event-id"] ?? null });
  });
  await page.goto(`${base}/`);
  await page.evaluate(() => {
    const feed = {
      events: [], opens: [], errors: [], started: performance.now(),
      summary() {
        return { events: this.events.length, opens: this.opens.length, errors: this.errors.length,
                 readyState: this.source.readyState, last: this.events.at(-1) ?? null };
      },
    };
    const now = () => Math.round(performance.now() - feed.started);
    feed.source = new EventSource("/items");
    for (const type of ["created", "replaced", "deleted", "reset", "message"]) {
      feed.source.addEventListener(type, (event) => {
        feed.events.push({ type, data: JSON.parse(event.data), lastEventId: event.lastEventId, at_ms: now() });
      });
    }
    feed.source.onopen = () => feed.opens.push(now());
    feed.source.onerror = () => feed.errors.push({ at_ms: now(), readyState: feed.source.readyState });
    window.feed = feed;
  });
  await until(page, "the stream to open", () => window.feed.opens.length === 1);

  // Writes from the page, as a web application would make them.
  const write = (method, path, body) => page.evaluate(async ([method, path, body]) => {
    const response = await fetch(path, {
      method,
      headers: body ? { "content-type": "application/json" } : {},
      body: body ? JSON.stringify(body) : undefined,
    });
    const text = await response.text();
    if (response.status >= 300) throw new Error(`${method} ${path}: ${response.status} ${text}`);
    return text ? JSON.parse(text) : null;
  }, [method, path, body]);

  // Every change the page must see, in commit order.
  const expected = [];
  const created = async (name) => {
    const item = await write("POST", "/items", { name });
    expected.push({ type: "created", data: item });
    return item;
  };
  const first = await created("pen");
  await created("ink");
  const third = await created("paper");
  const replaced = await write("PUT", `/items/${first.id}`, { name: "fountain pen" });
  expected.push({ type: "replaced", data: replaced });
  await write("DELETE", `/items/${third.id}`);
  expected.push({ type: "deleted", data: { id: third.id } });
  await until(page, `the first ${expected.length} changes`,
    (count) => window.feed.events.length >= count, expected.length, 5000);
  const beforeStop = await page.evaluate(() => window.feed.events.at(-1).lastEventId);

  // SIGTERM: the drain ends the stream; the browser tries again by itself.
  await ask("stop", "stopped");
  await until(page, "the browser to see the stream end", () => window.feed.errors.length >= 1);
  const written = JSON.parse(await ask("write", "written"));
  expected.push({ type: "created", data: written });
  // A few of the browser's attempts meet a closed port.
  await page.waitForTimeout(2 * seen.retry_ms + 500);
  await ask("restart", "started");
  const restartedAt = await page.evaluate(() => Math.round(performance.now() - window.feed.started));
  await until(page, "the browser to reconnect", () => window.feed.opens.length >= 2, undefined, 20000);
  await until(page, "the change made while the page was cut off",
    (count) => window.feed.events.length >= count, expected.length, 5000);
  await created("stamp");
  await created("envelope");
  await until(page, "the changes made after the restart",
    (count) => window.feed.events.length >= count, expected.length, 5000);
  // Anything extra (a repeat) would come with the rest: give it a moment.
  await page.waitForTimeout(500);

  const feed = await page.evaluate(() => ({
    events: window.feed.events, opens: window.feed.opens, errors: window.feed.errors,
    readyState: window.feed.source.readyState,
  }));
  Object.assign(seen, { expected: expected.length, received: feed.events.length, opens: feed.opens,
                        errors: feed.errors, restarted_at_ms: restartedAt, events: feed.events });
  seen.reconnected_after_ms = feed.opens[1] - restartedAt;

  // The checks.
  const failures = [];
  const shown = (event) => `${event.type} ${JSON.stringify(event.data)}`;
  if (feed.events.length !== expected.length) {
    failures.push(`${feed.events.length} events, ${expected.length} expected`);
  }
  expected.forEach((want, index) => {
    const got = feed.events[index];
    if (!got || shown(got) !== shown(want)) {
      failures.push(`event ${index}: ${got ? shown(got) : "none"}, expected ${shown(want)}`);
    }
  });
  if (feed.events.some((event) => event.type === "reset" || event.type === "message")) {
    failures.push("a reset or unnamed event came");
  }
  // Cursors are opaque to clients (C14); this store's are one prefix (the
  // file's origin) and a position, so on one file they share the prefix
  // and count up.
  const cursors = feed.events.map((event) => /^(.*\.)(\d+)$/.exec(event.lastEventId));
  if (cursors.some((cursor) => !cursor) || new Set(cursors.map((cursor) => cursor[1])).size !== 1) {
    failures.push(`cursors of another form than PREFIX.POSITION: ${feed.events.map((e) => e.lastEventId)}`);
  } else {
    const positions = cursors.map((cursor) => BigInt(cursor[2]));
    if (positions.some((position, index) => index > 0 && position <= positions[index - 1])) {
      failures.push(`cursors not increasing: ${feed.events.map((e) => e.lastEventId)}`);
    }
  }
  if (feed.opens.length !== 2) failures.push(`the stream opened ${feed.opens.length} times, 2 expected`);
  if (feed.readyState !== 1) failures.push(`the EventSource ended in readyState ${feed.readyState}, not OPEN`);
  // The attempt that succeeded named the last change seen before the stop.
  seen.feed_requests.sort((a, b) => a.at_ms - b.at_ms);
  const resumed = seen.feed_requests.at(-1);
  if (seen.feed_requests.length < 2 || resumed.last_event_id !== beforeStop) {
    failures.push(`the reconnection sent Last-Event-ID ${resumed?.last_event_id}, expected ${beforeStop}`);
  }
  if (seen.feed_requests[0]?.last_event_id !== null) failures.push("the first request sent a Last-Event-ID");

  await page.evaluate(({ events, failures }) => {
    document.documentElement.innerHTML = "<body></body>";
    const pre = document.createElement("pre");
    pre.style.font = "14px monospace";
    pre.textContent = `EventSource("/items"): ${events.length} events` +
      (failures.length ? `\nFAILED: ${failures.join("; ")}` : "") + "\n\n" +
      events.map((e) => `${e.at_ms} ms  ${e.type.padEnd(8)} ${JSON.stringify(e.data).padEnd(36)} id: ${e.lastEventId}`)
        .join("\n");
    document.body.append(pre);
  }, { events: feed.events, failures });
  await page.screenshot({ path: `${artifacts}/change-feed.png` });
  if (failures.length > 0) throw new Error(failures.join("; "));
} catch (error) {
  seen.error = String(error?.message ?? error);
  process.exitCode = 1;
} finally {
  seen.took_ms = Date.now() - started;
  writeFileSync(`${artifacts}/change-feed.json`, JSON.stringify(seen, null, 2) + "\n");
  await browser.close();
  console.log(`result ${JSON.stringify({ ...seen, events: seen.events?.length })}`);
  process.exit();
}
