// The web console in a real browser (Debian's Chromium, driven by playwright-core) against the
// real gateway binary that run.sh started: sign in with the admin key, create a tenant and a key
// in the page, call the public API with the secret the page showed (200), revoke the key in the
// page and see the same call refused (401) within the bound, rotate another, and check that the
// spend view's chart and table show exactly what the ledger (PostgreSQL) holds. Elements are found
// by their role and accessible name, as a user (or a screen reader) finds them.
// Run by run.sh, which sets the CONSOLE_TEST_* variables.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { after, before, describe, it } from "node:test";
import { chromium } from "playwright-core";

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run tests/console/run.sh`);
  return value;
};
const API = env("CONSOLE_TEST_API");
const ADMIN = env("CONSOLE_TEST_ADMIN");
const ADMIN_KEY = env("CONSOLE_TEST_ADMIN_KEY");
const ADMIN_NAME = env("CONSOLE_TEST_ADMIN_NAME");
const CALLER_KEY = env("CONSOLE_TEST_CALLER_KEY");
const PG_URL = env("CONSOLE_TEST_PG_URL");
const SCHEMA = env("CONSOLE_TEST_SCHEMA");
const GATEWAY_PID = Number(env("CONSOLE_TEST_GATEWAY_PID"));
const SHOTS = env("CONSOLE_TEST_SCREENSHOTS");
// How long a revoked or rotated-away secret may still be accepted: the bound the guide states
// for a change to reach every instance is a few seconds; this single instance gets twice that.
const REVOCATION_BOUND_MS = 10_000;
const TENANT = "team-console";
const SECRET = /^sy_[A-Za-z0-9_-]{43}$/;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `probe` until it returns something truthy, or fails after `ms` with what it saw last. */
async function until(what, probe, ms = 20_000) {
  const deadline = Date.now() + ms;
  let last;
  for (;;) {
    try {
      const value = await probe();
      if (value) return value;
      last = value;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms (last: ${last})`);
    await sleep(100);
  }
}

function gatewayAlive() {
  try {
    process.kill(GATEWAY_PID, 0);
    return true;
  } catch {
    return false;
  }
}

// Public API calls answered 200, each of which the ledger must hold.
let answered = 0;

async function rerank(secret) {
  const response = await fetch(`${API}/api/v1/rerank`, {
    method: "POST",
    headers: { Authorization: `Bearer ${secret}`, "Content-Type": "application/json" },
    body: JSON.stringify({
      model: "local-bm25",
      query: "capital of France",
      documents: ["Berlin is the capital of Germany.", "Paris is the capital of France."],
    }),
  });
  if (response.status === 200) answered += 1;
  return { status: response.status, body: await response.json().catch(() => null) };
}

async function admin(path, init = {}) {
  const response = await fetch(`${ADMIN}/admin/v1${path}`, {
    ...init,
    headers: { Authorization: `Bearer ${ADMIN_KEY}`, "Content-Type": "application/json", ...init.headers },
  });
  return { status: response.status, body: await response.json().catch(() => null) };
}

/** Rows of a query on the ledger, each a list of column texts. */
function sql(query) {
  // stderr captured: a failure's message carries it, and a poll's misses stay quiet.
  const out = execFileSync("psql", [PG_URL, "-qAtX", "-v", "ON_ERROR_STOP=1", "-F", "\t", "-c", query], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
  });
  return out.split("\n").filter(Boolean).map((line) => line.split("\t"));
}

/** "0.003000" → 3000000n billionths, as the ledger's cost_nanos. */
function nanos(text) {
  const [whole, fraction = ""] = text.split(".");
  return BigInt(whole) * 1_000_000_000n + BigInt(fraction.padEnd(9, "0").slice(0, 9));
}

let browser;
let page;
const problems = [];
const requests = [];

async function shot(name) {
  await page.screenshot({ path: `${SHOTS}/${name}.png`, fullPage: true });
}

async function view(name) {
  await page.getByRole("navigation", { name: "Console" }).getByRole("link", { name }).click();
  await page.getByRole("heading", { level: 1, name }).waitFor();
}

before(async () => {
  await until("the gateway answers /healthz and the management listener", async () => {
    if (!gatewayAlive()) throw new Error("the gateway exited (see target/console-test/gateway.log)");
    const health = await fetch(`${API}/healthz`);
    const console = await fetch(`${ADMIN}/console/`);
    return health.status === 200 && console.status === 200;
  });
  browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    // As root in CI: no sandbox. No background traffic to the internet (the network is closed).
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  page = await context.newPage();
  page.setDefaultTimeout(15_000);
  page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
  page.on("console", (message) => {
    // A 401 or 409 the page asked for is logged by Chromium as a failed resource: expected.
    if (message.type() === "error" && !message.text().startsWith("Failed to load resource")) {
      problems.push(`console: ${message.text()}`);
    }
  });
  page.on("request", (request) => requests.push(request));
});

after(async () => {
  await browser?.close();
});

describe("the web console", () => {
  it("is served with its security headers, and only its own files", async () => {
    for (const path of ["/console", "/console/"]) {
      const response = await fetch(`${ADMIN}${path}`);
      assert.equal(response.status, 200, path);
      assert.match(response.headers.get("content-type"), /^text\/html/);
      assert.match(response.headers.get("content-security-policy") ?? "", /script-src 'self'/);
      assert.equal(response.headers.get("x-content-type-options"), "nosniff");
      assert.equal(response.headers.get("cache-control"), "no-store");
    }
    const module = await fetch(`${ADMIN}/console/app.js`);
    assert.match(module.headers.get("content-type"), /^text\/javascript/);
    assert.equal((await fetch(`${ADMIN}/console/nope.js`)).status, 404);
    assert.equal((await admin("/whoami", { headers: { Authorization: "" } })).status, 401);
  });

  it("shows the API's message for a wrong admin key, and signs in with the right one", async () => {
    await page.goto(`${ADMIN}/console/`);
    await shot("login");
    await page.getByLabel("Admin key").fill("not-the-admin-key");
    await page.getByRole("button", { name: "Sign in" }).click();
    const refused = await admin("/whoami", { headers: { Authorization: "Bearer not-the-admin-key" } });
    assert.ok(refused.body.message, JSON.stringify(refused.body));
    assert.equal(refused.status, 401);
    await page.getByRole("alert").filter({ hasText: refused.body.message }).waitFor();

    await page.getByLabel("Admin key").fill(ADMIN_KEY);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByText(`Signed in as ${ADMIN_NAME} (key)`).waitFor();
    // The credential is in this tab's sessionStorage and no cookie exists.
    const { cookie, stored } = await page.evaluate(() => ({
      cookie: document.cookie,
      stored: Object.values(sessionStorage),
    }));
    assert.equal(cookie, "");
    assert.deepEqual(stored, [ADMIN_KEY]);
    assert.deepEqual(await page.context().cookies(), []);
  });

  it("creates a tenant with a budget, and shows a conflict's message", async () => {
    await view("Tenants");
    const form = page.getByRole("form", { name: "Create a tenant" });
    await form.getByLabel("Tenant name").fill(TENANT);
    await form.getByLabel("Description").fill("made by the browser test");
    await form.getByText("Limits and budget").click();
    await form.getByLabel("Requests per minute").fill("600");
    await form.getByLabel("Budget per day").fill("5.00");
    await form.getByRole("button", { name: "Create tenant" }).click();
    await page.getByRole("table", { name: "Tenants" }).getByRole("row", { name: new RegExp(`^${TENANT}\\b`) }).waitFor();
    const made = await admin(`/tenants/${TENANT}`);
    assert.equal(made.status, 200);
    assert.equal(made.body.description, "made by the browser test");
    assert.equal(made.body.limits.requests_per_minute, 600);
    assert.equal(nanos(made.body.limits.budget.per_day), nanos("5.00"));
    assert.equal(made.body.limits.budget.currency, "USD");
    assert.equal(made.body.allowed_models, null);

    // The same name again: the API's 409, its message on the page.
    const taken = await admin("/tenants", { method: "POST", body: JSON.stringify({ name: TENANT }) });
    assert.equal(taken.status, 409);
    await page.getByRole("form", { name: "Create a tenant" }).getByLabel("Tenant name").fill(TENANT);
    await page.getByRole("button", { name: "Create tenant" }).click();
    await page.getByRole("alert").filter({ hasText: taken.body.message }).waitFor();
    await shot("tenants");
  });

  const state = {};

  it("creates a key and shows its secret once; the key works", async () => {
    await view("Keys");
    const form = page.getByRole("form", { name: "Create a key" });
    await form.getByLabel("Tenant", { exact: true }).selectOption(TENANT);
    await form.getByLabel("Key name").fill("ci");
    await form.getByRole("button", { name: "Create key" }).click();
    const box = page.getByRole("region", { name: "New secret" });
    const secret = await box.getByLabel("Secret").inputValue();
    assert.match(secret, SECRET);
    state.secret = secret;

    const keys = await admin(`/keys?tenant=${TENANT}`);
    const key = keys.body.data.find((k) => k.name === "ci");
    assert.ok(key, JSON.stringify(keys.body));
    state.key = key;
    assert.equal(key.prefix, secret.slice(0, 9));
    assert.ok(!JSON.stringify(keys.body).includes(secret), "the API returned the secret again");
    const row = page.locator(`tr[data-key-id="${key.id}"]`);
    await row.getByText("active").waitFor();

    for (let i = 0; i < 3; i += 1) {
      const answer = await rerank(secret);
      assert.equal(answer.status, 200, JSON.stringify(answer.body));
      assert.equal(answer.body.results[0].index, 1);
    }
    // Another caller (a YAML key, no tenant) in the same ledger.
    assert.equal((await rerank(CALLER_KEY)).status, 200);

    await box.getByRole("button", { name: "Dismiss" }).click();
    await box.waitFor({ state: "detached" });
    assert.ok(!(await page.content()).includes(secret), "the secret is still in the page");
    await shot("keys");
  });

  it("rotates a key: the new secret works, the old one stops (no overlap)", async () => {
    const form = page.getByRole("form", { name: "Create a key" });
    await form.getByLabel("Tenant", { exact: true }).selectOption(TENANT);
    await form.getByLabel("Key name").fill("rotating");
    await form.getByRole("button", { name: "Create key" }).click();
    const box = page.getByRole("region", { name: "New secret" });
    const old = await box.getByLabel("Secret").inputValue();
    assert.match(old, SECRET);
    await box.getByRole("button", { name: "Dismiss" }).click();
    assert.equal((await rerank(old)).status, 200);

    await page.getByRole("button", { name: `Rotate key:${TENANT}/rotating` }).click();
    const dialog = page.getByRole("dialog", { name: `Rotate key:${TENANT}/rotating?` });
    await dialog.getByLabel("Old secret keeps working for (seconds)").fill("0");
    await dialog.getByRole("button", { name: "Rotate key" }).click();
    const rotated = await page.getByRole("region", { name: "New secret" }).getByLabel("Secret").inputValue();
    assert.match(rotated, SECRET);
    assert.notEqual(rotated, old);
    assert.equal((await rerank(rotated)).status, 200);
    await until("the old secret refused after a rotation without overlap", async () => (await rerank(old)).status === 401, REVOCATION_BOUND_MS);
    await page.getByRole("region", { name: "New secret" }).getByRole("button", { name: "Dismiss" }).click();
  });

  it("revokes the key after a confirmation; the key stops working within the bound", async () => {
    const principal = `key:${TENANT}/ci`;
    await page.getByRole("button", { name: `Revoke ${principal}` }).click();
    const dialog = page.getByRole("dialog", { name: `Revoke ${principal}?` });
    // Cancel first: nothing happens.
    await dialog.getByRole("button", { name: "Cancel" }).click();
    assert.equal((await rerank(state.secret)).status, 200);
    await page.getByRole("button", { name: `Revoke ${principal}` }).click();
    const started = Date.now();
    await dialog.getByRole("button", { name: "Revoke key" }).click();
    await page.locator(`tr[data-key-id="${state.key.id}"]`).getByText("revoked").waitFor();
    const refused = await until("the revoked key refused", async () => {
      const answer = await rerank(state.secret);
      return answer.status === 401 ? answer : null;
    }, REVOCATION_BOUND_MS);
    assert.equal(refused.body.code, "unauthorized");
    console.log(`# revoked key refused ${Date.now() - started} ms after the click`);
    const key = await admin(`/keys/${state.key.id}`);
    assert.equal(key.body.status, "revoked");
    assert.ok(key.body.revoked_at);
    await shot("keys-revoked");
  });

  it("charts and lists exactly the ledger's figures", async () => {
    // Every call answered above is written by the ledger's writer within its flush interval
    // (the refused ones are rows too): wait for all of them, then take the ledger's figures.
    const ledger = `${SCHEMA}.usage_records`;
    await until("the ledger's rows of every call", async () => Number(sql(`SELECT count(*) FROM ${ledger} WHERE status = 200`)[0][0]) >= answered);
    const rows = sql(`SELECT coalesce(tenant, ''), coalesce(model, ''), to_char(finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD'), count(*), sum(cost_nanos), currency
      FROM ${ledger} GROUP BY 1, 2, 3, 6 ORDER BY 1, 2, 3`);
    assert.ok(rows.some((r) => r[0] === TENANT), JSON.stringify(rows));
    assert.ok(rows.some((r) => r[0] === ""), "the YAML caller's rows have no tenant");

    await view("Spend");
    const form = page.getByRole("form", { name: "Spend report" });
    await form.getByLabel("Model", { exact: true }).check();
    await form.getByRole("button", { name: "Show spend" }).click();
    const chart = page.getByRole("img", { name: "Cost in USD per day, by tenant and model" });
    await chart.waitFor();
    const drawn = await chart.locator("rect.bar").evaluateAll((rects) =>
      rects.map((r) => ({ period: r.dataset.period, series: r.dataset.series, value: r.dataset.value, title: r.textContent })),
    );
    // Groups with no known cost (refused requests) are in the table, not in the money chart.
    const expected = rows.filter((r) => r[4] !== "").map(([tenant, model, day, , cost]) => ({
      period: day,
      series: `${tenant || "(no tenant)"} · ${model || "(no model)"}`,
      nanos: BigInt(cost),
    }));
    assert.equal(drawn.length, expected.length, JSON.stringify({ drawn, rows }));
    for (const want of expected) {
      const bar = drawn.find((d) => d.period === want.period && d.series === want.series);
      assert.ok(bar, `no bar for ${want.series} on ${want.period}: ${JSON.stringify(drawn)}`);
      assert.equal(nanos(bar.value), want.nanos, `${want.series} on ${want.period}`);
      assert.ok(bar.title.includes(`${bar.value} USD`), bar.title);
    }
    // The table: the same figures, requests and cost per row.
    const table = page.getByRole("table", { name: "Spend figures" });
    const cells = await table.locator("tbody tr").evaluateAll((trs) =>
      trs.map((tr) => Object.fromEntries([...tr.cells].map((td) => [td.dataset.column, td.textContent]))),
    );
    assert.equal(cells.length, rows.length, JSON.stringify(cells));
    for (const [tenant, model, day, count, cost] of rows) {
      const row = cells.find((c) => c.day === day && c.model === (model || "(no model)") && c.tenant === (tenant || "(no tenant)"));
      assert.ok(row, `no table row for ${tenant}/${model}/${day}: ${JSON.stringify(cells)}`);
      assert.equal(row.requests, count);
      if (cost === "") {
        assert.equal(row.cost, "unknown");
      } else {
        assert.equal(nanos(row.cost), BigInt(cost));
        assert.equal(row.currency, "USD");
      }
    }
    await shot("spend");

    // Requests per day by tenant, side by side: the ledger's counts.
    await form.getByLabel("Model", { exact: true }).uncheck();
    await form.getByLabel("Chart shows").selectOption("requests");
    await form.getByLabel("Side by side").check();
    await form.getByRole("button", { name: "Show spend" }).click();
    const counts = page.getByRole("img", { name: "Requests per day, by tenant" });
    await counts.waitFor();
    const bars = await counts.locator("rect.bar").evaluateAll((rects) => rects.map((r) => [r.dataset.series, r.dataset.period, r.dataset.value]));
    const perTenant = sql(`SELECT coalesce(tenant, ''), to_char(finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD'), count(*) FROM ${ledger} GROUP BY 1, 2`);
    assert.deepEqual(
      bars.sort(),
      perTenant.map(([t, d, n]) => [t || "(no tenant)", d, n]).sort(),
    );
    await shot("spend-requests");

    // Cost per day by key (each caller's principal): the ledger's sums per caller.
    await form.getByLabel("Tenant", { exact: true }).uncheck();
    await form.getByLabel("Key", { exact: true }).check();
    await form.getByLabel("Chart shows").selectOption("cost");
    await form.getByLabel("Stacked").check();
    await form.getByRole("button", { name: "Show spend" }).click();
    const perKey = page.getByRole("img", { name: "Cost in USD per day, by key" });
    await perKey.waitFor();
    const keyBars = await perKey.locator("rect.bar").evaluateAll((rects) => rects.map((r) => [r.dataset.series, r.dataset.period, r.dataset.value]));
    const callers = sql(`SELECT caller, to_char(finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD'), sum(cost_nanos) FROM ${ledger} WHERE cost_nanos IS NOT NULL GROUP BY 1, 2`);
    assert.ok(callers.some(([c]) => c === `key:${TENANT}/ci`), JSON.stringify(callers));
    assert.deepEqual(
      keyBars.map(([s, d, v]) => [s, d, String(nanos(v))]).sort(),
      callers.map(([c, d, n]) => [c, d, n]).sort(),
    );
  });

  it("lists the models with their health and lifecycle", async () => {
    await view("Models");
    const row = page.getByRole("table", { name: "Models" }).getByRole("row", { name: /local-bm25/ });
    await row.waitFor();
    await row.getByText("healthy").waitFor();
    assert.match(await row.textContent(), /builtin/);
    await shot("models");
  });

  it("keeps the credential out of every URL, and hit nothing the page's policy refused", async () => {
    let carried = 0;
    for (const request of requests) {
      assert.ok(!request.url().includes(ADMIN_KEY), request.url());
      if (request.url().startsWith(`${ADMIN}/admin/`)) {
        const headers = await request.allHeaders();
        assert.match(headers.authorization ?? "", /^Bearer /, request.url());
        assert.equal(headers.cookie, undefined);
        if (headers.authorization === `Bearer ${ADMIN_KEY}`) carried += 1;
      }
    }
    assert.ok(carried > 5, `${carried} API calls carried the admin key`);
    assert.deepEqual(problems, []);
  });

  it("adds money exactly and lays out its periods (the page's own modules)", async () => {
    const got = await page.evaluate(async () => {
      const decimal = await import("/console/decimal.js");
      const spend = await import("/console/spend.js");
      return {
        sum: decimal.sum(["0.1", "0.2", "0.000000001"]),
        days: spend.periods("2026-11-29", "2026-12-02", "day"),
        months: spend.periods("2026-11-15", "2027-01-03", "month"),
      };
    });
    assert.deepEqual(got, {
      sum: "0.300000001",
      days: ["2026-11-29", "2026-11-30", "2026-12-01", "2026-12-02"],
      months: ["2026-11", "2026-12", "2027-01"],
    });
  });

  it("signs out: the credential is forgotten", async () => {
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByLabel("Admin key").waitFor();
    assert.deepEqual(await page.evaluate(() => Object.keys(sessionStorage)), []);
  });
});
