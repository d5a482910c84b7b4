// The keys view: every API key (optionally one tenant's), creating one (its secret shown once,
// in a box the operator dismisses), rotating one (the new secret shown the same way) and
// revoking one after a confirmation.

import * as api from "./api.js";
import { confirmDialog, errorBox, field, h, replace, when } from "./dom.js";
import { limitsFieldset, parseModels } from "./limits.js";

export const title = "Keys";

/**
 * The one place a secret appears: a read-only field with a copy button. Dismissing it removes
 * the secret from the page; nothing keeps it (the API never returns it again).
 */
function secretBox(slot, heading, secret, note) {
  const input = h("input", {
    type: "text",
    readonly: true,
    value: secret,
    spellcheck: "false",
    autocomplete: "off",
    class: "secret",
  });
  const copied = h("span", { role: "status", class: "copied" });
  const copy = async () => {
    input.select();
    try {
      await navigator.clipboard.writeText(secret);
      copied.textContent = "Copied.";
    } catch {
      // Not a secure context (plain HTTP off loopback): the text is selected for Ctrl+C.
      copied.textContent = "Selected: press Ctrl+C to copy.";
    }
  };
  const box = h(
    "section",
    { class: "secret-box", "aria-label": "New secret" },
    h("h2", {}, heading),
    h("p", {}, "This secret is shown once. Copy it now: it cannot be shown again."),
    field("Secret", input),
    note ? h("p", {}, note) : null,
    h(
      "div",
      { class: "actions" },
      h("button", { type: "button", onclick: copy }, "Copy secret"),
      h("button", { type: "button", class: "secondary", onclick: () => slot.replaceChildren() }, "Dismiss"),
      copied,
    ),
  );
  replace(slot, box);
  input.focus();
  input.select();
}

function createForm(tenants, errors, onCreated) {
  const tenant = h(
    "select",
    { required: true },
    tenants.filter((t) => !t.disabled_at).map((t) => h("option", { value: t.name }, t.name)),
  );
  const name = h("input", { type: "text", required: true, autocomplete: "off" });
  const models = h("input", { type: "text", autocomplete: "off" });
  const expires = h("input", { type: "datetime-local" });
  const limits = limitsFieldset(null);
  const form = h(
    "form",
    { class: "card", "aria-label": "Create a key" },
    h("h2", {}, "Create a key"),
    h(
      "div",
      { class: "row" },
      field("Tenant", tenant),
      field("Key name", name),
      field("Allowed models", models, "comma-separated; empty: the tenant's"),
      field("Expires at", expires, "your local time; empty: never"),
    ),
    limits.element,
    h("button", { type: "submit" }, "Create key"),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    errors.clear();
    try {
      const body = { tenant: tenant.value, name: name.value.trim() };
      const allowed = parseModels(models.value);
      if (allowed) body.allowed_models = allowed;
      if (expires.value) body.expires_at = new Date(expires.value).toISOString();
      const set = limits.read();
      if (Object.keys(set).length) body.limits = set;
      const key = await api.post("/keys", body);
      form.reset();
      onCreated(key);
    } catch (error) {
      errors.show(error);
    }
  });
  return form;
}

/** When the key was last rotated and whether its old secret still works. */
function rotation(key) {
  if (!key.rotated_at) return "—";
  const until = key.previous_expires_at;
  if (until && Date.parse(until) > Date.now()) return `${when(key.rotated_at)}; old secret until ${when(until)}`;
  return `${when(key.rotated_at)}; old secret refused`;
}

function keyRow(key, actions) {
  const active = key.status === "active";
  return h(
    "tr",
    { "data-key-id": key.id },
    h("th", { scope: "row" }, key.name),
    h("td", {}, key.tenant),
    h("td", {}, h("code", {}, key.prefix), "…"),
    h("td", {}, h("span", { class: `status status-${key.status}` }, key.status)),
    h("td", {}, when(key.created_at)),
    h("td", {}, when(key.expires_at)),
    h("td", {}, rotation(key)),
    h(
      "td",
      { class: "row-actions" },
      h("button", { type: "button", disabled: !active, "aria-label": `Rotate ${key.principal}`, onclick: () => actions.rotate(key) }, "Rotate"),
      h("button", { type: "button", class: "danger", disabled: key.status === "revoked", "aria-label": `Revoke ${key.principal}`, onclick: () => actions.revoke(key) }, "Revoke"),
    ),
  );
}

function keysTable(keys, actions) {
  if (!keys.length) return h("p", { class: "empty" }, "No keys yet.");
  return h(
    "table",
    { "aria-label": "Keys" },
    h(
      "thead",
      {},
      h("tr", {}, ["Name", "Tenant", "Prefix", "Status", "Created", "Expires", "Rotated", "Actions"].map((c) => h("th", { scope: "col" }, c))),
    ),
    h("tbody", {}, keys.map((key) => keyRow(key, actions))),
  );
}

export async function render(root) {
  const errors = errorBox();
  const secretSlot = h("div");
  const formSlot = h("div");
  const filter = h("select", {}, h("option", { value: "" }, "All tenants"));
  const list = h("div");
  replace(root, h("h1", {}, "Keys"), errors.element, secretSlot, formSlot, field("Show keys of", filter), list);

  const actions = {
    async rotate(key) {
      const overlap = h("input", { type: "number", min: "0", step: "1", value: "3600" });
      const go = await confirmDialog({
        title: `Rotate ${key.principal}?`,
        text: "A new secret is made. The old one keeps working for the overlap you give, then stops.",
        action: "Rotate key",
        body: field("Old secret keeps working for (seconds)", overlap),
      });
      if (!go) return;
      errors.clear();
      try {
        const rotated = await api.post(`/keys/${api.enc(key.id)}/rotate`, { overlap_seconds: Number(overlap.value || 0) });
        const note = rotated.previous_expires_at ? `The old secret works until ${when(rotated.previous_expires_at)}.` : "The old secret no longer works.";
        secretSlot.dataset.keyId = rotated.id;
        secretBox(secretSlot, `Key ${rotated.principal} rotated`, rotated.secret, note);
        await load();
      } catch (error) {
        errors.show(error);
      }
    },
    async revoke(key) {
      const go = await confirmDialog({
        title: `Revoke ${key.principal}?`,
        text: "Every instance refuses this key (and any older secret of it) within seconds. This cannot be undone.",
        action: "Revoke key",
      });
      if (!go) return;
      errors.clear();
      try {
        await api.post(`/keys/${api.enc(key.id)}/revoke`);
        await load();
      } catch (error) {
        errors.show(error);
      }
    },
  };

  async function load() {
    const query = filter.value ? `?tenant=${api.enc(filter.value)}` : "";
    const keys = await api.get(`/keys${query}`);
    replace(list, keysTable(keys.data, actions));
  }

  try {
    const tenants = (await api.get("/tenants")).data;
    filter.append(...tenants.map((t) => h("option", { value: t.name }, t.name)));
    filter.addEventListener("change", () => load().catch((e) => errors.show(e)));
    if (tenants.some((t) => !t.disabled_at)) {
      replace(formSlot, createForm(tenants, errors, async (key) => {
        secretSlot.dataset.keyId = key.id;
        secretBox(secretSlot, `Key ${key.principal} created`, key.secret, null);
        await load();
      }));
    } else {
      replace(formSlot, h("p", { class: "empty" }, "Create a tenant first: every key belongs to one."));
    }
    await load();
  } catch (error) {
    errors.show(error);
  }
}
