// The limits-and-budget part of the tenant and key forms: the fields of the API's Limits object
// (the same as `auth.api_keys[].limits` in YAML), each optional, empty meaning no limit.

import { field, h, uid } from "./dom.js";

const COUNTS = [
  ["requests_per_minute", "Requests per minute"],
  ["concurrent", "Concurrent requests"],
  ["tokens_per_minute", "Tokens per minute"],
  ["tokens_per_day", "Tokens per day"],
  ["characters_per_minute", "Characters per minute"],
  ["characters_per_day", "Characters per day"],
  ["images_per_minute", "Images per minute"],
  ["images_per_day", "Images per day"],
];
const DECIMAL = /^\d+(\.\d+)?$/;

/** A short text for a table cell: "60 requests/min, budget 5.00 USD/day". */
export function describeLimits(limits) {
  if (!limits) return "none";
  const parts = [];
  for (const [key, label] of COUNTS) {
    if (limits[key] !== null && limits[key] !== undefined) parts.push(`${label}: ${limits[key]}`);
  }
  const budget = limits.budget;
  if (budget) {
    if (budget.per_day) parts.push(`Budget: ${budget.per_day} ${budget.currency || ""}/day`);
    if (budget.per_month) parts.push(`Budget: ${budget.per_month} ${budget.currency || ""}/month`);
  }
  return parts.length ? parts.join("; ") : "none";
}

/**
 * The fieldset, filled from `initial` (a Limits object or null). `read()` gives the Limits object
 * the form describes (only the fields set) or throws {message, details} naming the bad fields.
 */
export function limitsFieldset(initial, legend = "Limits and budget") {
  const limits = initial || {};
  const budget = limits.budget || {};
  const inputs = {};
  const counts = COUNTS.map(([key, label]) => {
    inputs[key] = h("input", {
      type: "number",
      min: "0",
      step: "1",
      inputmode: "numeric",
      value: limits[key] ?? "",
    });
    return field(label, inputs[key]);
  });
  inputs.currency = h("input", {
    type: "text",
    maxlength: "3",
    size: "4",
    value: budget.currency || "USD",
  });
  inputs.per_day = h("input", { type: "text", inputmode: "decimal", value: budget.per_day || "" });
  inputs.per_month = h("input", {
    type: "text",
    inputmode: "decimal",
    value: budget.per_month || "",
  });
  const open = Object.keys(limits).some((k) => limits[k] !== null && limits[k] !== undefined);
  const element = h(
    "details",
    { class: "limits", open: open || undefined },
    h("summary", {}, legend),
    h("fieldset", { id: uid("limits") }, h("legend", {}, "Counts (empty: no limit)"), counts),
    h(
      "fieldset",
      {},
      h("legend", {}, "Budget in money (empty: none)"),
      field("Budget currency", inputs.currency, "ISO 4217, e.g. USD"),
      field("Budget per day", inputs.per_day, "a decimal, e.g. 5.00"),
      field("Budget per month", inputs.per_month),
    ),
  );
  return { element, read: () => read(inputs) };
}

function read(inputs) {
  const out = {};
  const details = {};
  for (const [key, label] of COUNTS) {
    const text = inputs[key].value.trim();
    if (inputs[key].validity && inputs[key].validity.badInput) {
      details[key] = `${label}: not a number`;
    } else if (text !== "") {
      const n = Number(text);
      if (Number.isInteger(n) && n >= 0) out[key] = n;
      else details[key] = `${label}: a whole number of at least 0`;
    }
  }
  const perDay = inputs.per_day.value.trim();
  const perMonth = inputs.per_month.value.trim();
  if (perDay || perMonth) {
    const currency = inputs.currency.value.trim().toUpperCase();
    if (!/^[A-Z]{3}$/.test(currency)) details["budget.currency"] = "three letters (ISO 4217)";
    if (perDay && !DECIMAL.test(perDay)) details["budget.per_day"] = "a decimal such as 5.00";
    if (perMonth && !DECIMAL.test(perMonth)) details["budget.per_month"] = "a decimal such as 100";
    out.budget = { currency };
    if (perDay) out.budget.per_day = perDay;
    if (perMonth) out.budget.per_month = perMonth;
  }
  if (Object.keys(details).length) {
    const error = new Error("Some limits are not valid.");
    error.details = details;
    throw error;
  }
  return out;
}

/** "tts-1, rerank-v3.5" → ["tts-1", "rerank-v3.5"]; empty → null (every model). */
export function parseModels(text) {
  const list = text
    .split(/[\s,]+/)
    .map((m) => m.trim())
    .filter(Boolean);
  return list.length ? list : null;
}
