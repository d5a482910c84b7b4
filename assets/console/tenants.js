// The tenants view: every tenant with its limits, budget and allowed models; creating one,
// editing one (the same form, filled), and disabling one after a confirmation (its keys stop
// working; it is kept, since the ledger names it).

import * as api from "./api.js";
import { confirmDialog, errorBox, field, h, replace, when } from "./dom.js";
import { describeLimits, limitsFieldset, parseModels } from "./limits.js";

export const title = "Tenants";

/** The create form, or the edit form when `tenant` is given. */
function tenantForm(tenant, errors, done) {
  const editing = Boolean(tenant);
  const name = h("input", {
    type: "text",
    required: true,
    autocomplete: "off",
    pattern: "[a-z0-9][a-z0-9_\\-]{0,62}",
    value: editing ? tenant.name : "",
    readonly: editing,
  });
  const description = h("input", { type: "text", value: editing ? tenant.description || "" : "" });
  const models = h("input", {
    type: "text",
    autocomplete: "off",
    value: editing && tenant.allowed_models ? tenant.allowed_models.join(", ") : "",
  });
  const limits = limitsFieldset(editing ? tenant.limits : null);
  const heading = editing ? `Edit tenant ${tenant.name}` : "Create a tenant";
  const form = h(
    "form",
    { class: "card", "aria-label": heading },
    h("h2", {}, heading),
    h(
      "div",
      { class: "row" },
      field("Tenant name", name, editing ? null : "lower case letters, digits, - and _"),
      field("Description", description),
      field("Allowed models", models, "comma-separated; empty: every model"),
    ),
    limits.element,
    h(
      "div",
      { class: "actions" },
      h("button", { type: "submit" }, editing ? "Save tenant" : "Create tenant"),
      editing ? h("button", { type: "button", class: "secondary", onclick: () => done(null) }, "Cancel") : null,
    ),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    errors.clear();
    try {
      const body = {
        description: description.value.trim(),
        limits: limits.read(),
        // null on purpose when empty: every model (the API's meaning of null).
        allowed_models: parseModels(models.value),
      };
      const saved = editing
        ? await api.patch(`/tenants/${api.enc(tenant.name)}`, body)
        : await api.post("/tenants", { name: name.value.trim(), ...body });
      done(saved);
    } catch (error) {
      errors.show(error);
    }
  });
  return form;
}

function tenantRow(tenant, actions) {
  const disabled = Boolean(tenant.disabled_at);
  return h(
    "tr",
    { "data-tenant": tenant.name },
    h("th", { scope: "row" }, tenant.name),
    h("td", {}, tenant.description || "—"),
    h("td", {}, tenant.allowed_models ? tenant.allowed_models.join(", ") : "every model"),
    h("td", {}, describeLimits(tenant.limits)),
    h("td", {}, disabled ? h("span", { class: "status status-disabled" }, `disabled ${when(tenant.disabled_at)}`) : h("span", { class: "status status-active" }, "active")),
    h(
      "td",
      { class: "row-actions" },
      h("button", { type: "button", disabled, "aria-label": `Edit tenant ${tenant.name}`, onclick: () => actions.edit(tenant) }, "Edit"),
      h("button", { type: "button", class: "danger", disabled, "aria-label": `Disable tenant ${tenant.name}`, onclick: () => actions.disable(tenant) }, "Disable"),
    ),
  );
}

function tenantsTable(tenants, actions) {
  if (!tenants.length) return h("p", { class: "empty" }, "No tenants yet.");
  return h(
    "table",
    { "aria-label": "Tenants" },
    h("thead", {}, h("tr", {}, ["Name", "Description", "Allowed models", "Limits and budget", "Status", "Actions"].map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", {}, tenants.map((t) => tenantRow(t, actions))),
  );
}

export async function render(root) {
  const errors = errorBox();
  const notice = h("p", { role: "status", class: "notice" });
  const formSlot = h("div");
  const list = h("div");
  replace(root, h("h1", {}, "Tenants"), errors.element, notice, formSlot, list);
  // A failure replaces the last success's notice, so the two are never shown together.
  const report = {
    show(error) {
      notice.textContent = "";
      errors.show(error);
    },
    clear: () => errors.clear(),
  };

  const showCreate = () => replace(formSlot, tenantForm(null, report, saved));
  async function saved(tenant) {
    notice.textContent = tenant ? `Saved tenant ${tenant.name}.` : "";
    showCreate();
    await load();
  }
  const actions = {
    edit(tenant) {
      errors.clear();
      replace(formSlot, tenantForm(tenant, report, saved));
      formSlot.querySelector("input:not([readonly])")?.focus();
    },
    async disable(tenant) {
      const go = await confirmDialog({
        title: `Disable tenant ${tenant.name}?`,
        text: "Every key of this tenant stops working. The tenant stays in the ledger's reports.",
        action: "Disable tenant",
      });
      if (!go) return;
      errors.clear();
      try {
        await api.request("DELETE", `/tenants/${api.enc(tenant.name)}`);
        notice.textContent = `Disabled tenant ${tenant.name}.`;
        await load();
      } catch (error) {
        errors.show(error);
      }
    },
  };

  async function load() {
    const tenants = (await api.get("/tenants")).data;
    replace(list, tenantsTable(tenants, actions));
  }

  showCreate();
  try {
    await load();
  } catch (error) {
    errors.show(error);
  }
}
