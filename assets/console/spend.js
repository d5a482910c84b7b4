// The spend view: the ledger's figures from `GET /admin/v1/spend` for a window, grouped by tenant,
// key and/or model per day or month; drawn as a bar chart (one per currency for money) and listed
// in a table with the same figures, exactly as the API gave them.

import * as api from "./api.js";
import { barChart } from "./chart.js";
import { sum } from "./decimal.js";
import { errorBox, field, h, replace } from "./dom.js";

export const title = "Spend";

const DIMENSIONS = [
  ["tenant", "Tenant"],
  ["model", "Model"],
  ["key", "Key"],
];
const MEASURES = [
  ["cost", "Cost"],
  ["requests", "Requests"],
  ["tokens", "Tokens"],
  ["characters", "Characters"],
  ["images", "Images"],
];
const DAY_MS = 86400000;

function isoDay(date) {
  return date.toISOString().slice(0, 10);
}

// Kept while the page is open, so coming back to the view shows the same report.
const state = {
  from: isoDay(new Date(Date.now() - 29 * DAY_MS)),
  to: isoDay(new Date()),
  dims: ["tenant"],
  period: "day",
  measure: "cost",
  stacked: true,
};

/** Every day (or month) from `from` to `to`, inclusive, as the API names them. */
export function periods(from, to, period) {
  const out = [];
  const end = Date.parse(`${to}T00:00:00Z`);
  let at = Date.parse(`${from}T00:00:00Z`);
  if (Number.isNaN(at) || Number.isNaN(end)) return out;
  while (at <= end && out.length < 4000) {
    const day = isoDay(new Date(at));
    if (period === "day") {
      out.push(day);
      at += DAY_MS;
    } else {
      const month = day.slice(0, 7);
      if (!out.includes(month)) out.push(month);
      const d = new Date(at);
      at = Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
    }
  }
  return out;
}

function periodOf(row, period) {
  const value = row[period];
  if (!value) return null;
  return period === "day" ? value.slice(0, 10) : value.slice(0, 7);
}

/** A group's name: its grouping values ("team-a · tts-1"); a key is its caller principal. */
function seriesOf(row, dims) {
  if (!dims.length) return "all";
  return dims
    .map((d) => (row[d] === null || row[d] === undefined ? `(no ${d})` : row[d]))
    .join(" · ");
}

/** The chart's cells for one measure over `rows` (one currency's rows when the measure is cost). */
function cellsOf(rows, measure, dims, period) {
  const grouped = new Map();
  for (const row of rows) {
    const at = periodOf(row, period);
    const value = row[measure];
    if (!at || value === null || value === undefined) continue;
    const series = seriesOf(row, dims);
    const id = `${at}\u0000${series}`;
    if (!grouped.has(id)) grouped.set(id, { period: at, series, values: [] });
    grouped.get(id).values.push(String(value));
  }
  return [...grouped.values()].map((c) => {
    const value = measure === "cost" ? sum(c.values) : String(c.values.reduce((a, b) => a + Number(b), 0));
    return { period: c.period, series: c.series, value, amount: Number(value) };
  });
}

function chartsOf(report) {
  const { measure, stacked } = state;
  const period = report.by.includes("month") ? "month" : "day";
  const dims = report.by.filter((d) => d !== "day" && d !== "month");
  const xs = periods(report.from, report.to, period);
  const groups = new Map();
  if (measure === "cost") {
    for (const row of report.data) {
      if (row.cost === null || row.cost === undefined) continue;
      const currency = row.currency || "unknown currency";
      if (!groups.has(currency)) groups.set(currency, []);
      groups.get(currency).push(row);
    }
  } else {
    groups.set(measure, report.data);
  }
  const measureName = MEASURES.find(([m]) => m === measure)[1];
  const by = dims.length ? `, by ${dims.join(" and ")}` : "";
  return [...groups.entries()].map(([unit, rows]) => {
    const cells = cellsOf(rows, measure, dims, period);
    const series = [...new Set(cells.map((c) => c.series))].sort();
    const totals = new Map();
    for (const x of xs) {
      const values = cells.filter((c) => c.period === x).map((c) => c.value);
      totals.set(x, measure === "cost" ? sum(values) : String(values.reduce((a, b) => a + Number(b), 0)));
    }
    const label = measure === "cost" ? `${measureName} in ${unit} per ${period}${by}` : `${measureName} per ${period}${by}`;
    return barChart({ periods: xs, series, cells, totals, unit, label, stacked });
  });
}

function charts(report) {
  const drawn = chartsOf(report);
  return drawn.length ? drawn : h("p", { class: "empty" }, "Nothing to chart in this window.");
}

function table(report) {
  const columns = report.by;
  const sorted = [...report.data].sort((a, b) => {
    for (const c of [...columns.filter((x) => x === "day" || x === "month"), ...columns, "currency"]) {
      const x = String(a[c] ?? "");
      const y = String(b[c] ?? "");
      if (x !== y) return x < y ? -1 : 1;
    }
    return 0;
  });
  const head = [...columns, "requests", "tokens", "characters", "images", "cost", "currency"];
  const cell = (row, c) => {
    const value = row[c];
    if (value === null || value === undefined) {
      if (c === "cost") return "unknown";
      // A grouping column's null is a group of its own, named as the chart's legend names it.
      return ["tenant", "model", "key"].includes(c) ? `(no ${c})` : "—";
    }
    return value;
  };
  return h(
    "table",
    { "aria-label": "Spend figures", class: "figures" },
    h("thead", {}, h("tr", {}, head.map((c) => h("th", { scope: "col" }, c)))),
    h(
      "tbody",
      {},
      sorted.length
        ? sorted.map((row) => h("tr", {}, head.map((c) => h("td", { "data-column": c, class: ["requests", "tokens", "characters", "images", "cost"].includes(c) ? "num" : null }, cell(row, c)))))
        : h("tr", {}, h("td", { colspan: head.length }, "Nothing was recorded in this window.")),
    ),
  );
}

function controls(onSubmit) {
  const from = h("input", { type: "date", value: state.from, required: true });
  const to = h("input", { type: "date", value: state.to, required: true });
  const boxes = DIMENSIONS.map(([d, label]) => {
    const box = h("input", { type: "checkbox", value: d, checked: state.dims.includes(d) });
    return { d, box, element: h("label", { class: "inline" }, box, ` ${label}`) };
  });
  const radio = (group, value, label, checked) => {
    const input = h("input", { type: "radio", name: group, value, checked });
    return { input, element: h("label", { class: "inline" }, input, ` ${label}`) };
  };
  const day = radio("spend-period", "day", "Day", state.period === "day");
  const month = radio("spend-period", "month", "Month", state.period === "month");
  const stacked = radio("spend-bars", "stacked", "Stacked", state.stacked);
  const grouped = radio("spend-bars", "grouped", "Side by side", !state.stacked);
  const measure = h("select", {}, MEASURES.map(([m, label]) => h("option", { value: m }, label)));
  measure.value = state.measure;
  const form = h(
    "form",
    { class: "card", "aria-label": "Spend report" },
    h(
      "div",
      { class: "row" },
      field("From", from),
      field("To", to, "UTC days, inclusive"),
      h("fieldset", {}, h("legend", {}, "Group by"), boxes.map((b) => b.element)),
      h("fieldset", {}, h("legend", {}, "Per"), day.element, month.element),
      field("Chart shows", measure),
      h("fieldset", {}, h("legend", {}, "Bars"), stacked.element, grouped.element),
    ),
    h("button", { type: "submit" }, "Show spend"),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    Object.assign(state, {
      from: from.value,
      to: to.value,
      dims: boxes.filter((b) => b.box.checked).map((b) => b.d),
      period: month.input.checked ? "month" : "day",
      measure: measure.value,
      stacked: stacked.input.checked,
    });
    onSubmit();
  });
  return form;
}

export async function render(root) {
  const errors = errorBox();
  const result = h("div", { class: "spend-result", "aria-busy": "false" });
  const load = async () => {
    errors.clear();
    result.setAttribute("aria-busy", "true");
    try {
      const by = [...state.dims, state.period].join(",");
      const query = `?by=${api.enc(by)}&from=${api.enc(state.from)}&to=${api.enc(state.to)}`;
      const report = await api.get(`/spend${query}`);
      replace(
        result,
        h("p", { class: "window" }, `From ${report.from} to ${report.to} (UTC), by ${report.by.join(", ")}.`),
        charts(report),
        table(report),
      );
    } catch (error) {
      errors.show(error);
    } finally {
      result.setAttribute("aria-busy", "false");
    }
  };
  replace(root, h("h1", {}, "Spend"), errors.element, controls(load), result);
  await load();
}
