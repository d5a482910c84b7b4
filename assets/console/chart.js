// A bar chart in SVG, drawn here (no library): one bar per period (day or month), its segments
// stacked or set side by side per series (a tenant, model or key). Every segment carries its
// exact figure twice: in a <title> (the tooltip, read by screen readers) and in data attributes
// (data-period, data-series, data-value) so a test can read what is drawn.

import { h, s } from "./dom.js";

const HEIGHT = 280;
const MARGIN = { top: 16, right: 16, bottom: 44, left: 72 };
const PALETTE = 8;
const PLOT_WIDTH = 1000;

/** The axis: a round step (1, 2, 2.5 or 5 times a power of ten) and how many of them reach `max`. */
function scaleFor(max) {
  if (!(max > 0)) return { step: 1, count: 1 };
  const rough = max / 4;
  const power = 10 ** Math.floor(Math.log10(rough));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * power).find((s) => s >= rough) ?? 10 * power;
  return { step, count: Math.max(1, Math.ceil(max / step - 1e-9)) };
}

function tickText(value) {
  if (value === 0) return "0";
  return Number(value.toPrecision(4)).toString();
}

function axes(width, plotHeight, { step, count }, unit) {
  const ticks = [];
  for (let i = 0; i <= count; i += 1) {
    const value = step * i;
    const y = MARGIN.top + plotHeight - (plotHeight * i) / count;
    ticks.push(
      s("line", { x1: MARGIN.left, x2: width - MARGIN.right, y1: y, y2: y, class: i ? "grid" : "axis" }),
      s("text", { x: MARGIN.left - 6, y: y + 4, class: "tick", "text-anchor": "end" }, tickText(value)),
    );
  }
  ticks.push(s("text", { x: 12, y: MARGIN.top + plotHeight / 2, class: "unit", transform: `rotate(-90 12 ${MARGIN.top + plotHeight / 2})`, "text-anchor": "middle" }, unit));
  return ticks;
}

function periodLabel(period) {
  return period.length === 10 ? period.slice(5) : period;
}

/** Where each segment of one period goes: [{cell, x, y, width, height}]. */
function layoutPeriod(cells, series, x0, slot, scale, stacked) {
  const boxes = [];
  const inner = slot * 0.8;
  let stackTop = MARGIN.top + (HEIGHT - MARGIN.top - MARGIN.bottom);
  series.forEach((name, index) => {
    const cell = cells.get(name);
    if (!cell) return;
    const height = Math.max(0, cell.amount * scale);
    if (stacked) {
      stackTop -= height;
      boxes.push({ cell, index, x: x0 + slot * 0.1, y: stackTop, width: inner, height });
    } else {
      const width = inner / series.length;
      const bottom = MARGIN.top + (HEIGHT - MARGIN.top - MARGIN.bottom);
      boxes.push({ cell, index, x: x0 + slot * 0.1 + index * width, y: bottom - height, width, height });
    }
  });
  return boxes;
}

/**
 * The chart: `periods` (x, in order), `series` (legend order), `cells` [{period, series, value
 * (the exact text), amount (a number, for the geometry only)}], `totals` period → exact text,
 * `unit` ("USD", "requests"), `label` (what the chart shows, for its accessible name).
 */
export function barChart({ periods, series, cells, totals, unit, label, stacked }) {
  const byPeriod = new Map(periods.map((p) => [p, new Map()]));
  for (const cell of cells) byPeriod.get(cell.period)?.set(cell.series, cell);
  const heights = periods.map((p) => {
    const amounts = [...byPeriod.get(p).values()].map((c) => c.amount);
    return stacked ? amounts.reduce((a, b) => a + b, 0) : Math.max(0, ...amounts);
  });
  const axis = scaleFor(Math.max(0, ...heights));
  // Periods share the width a page has room for (bars get thinner), down to 8 px a period;
  // a longer window scrolls.
  const wanted = stacked ? 24 : Math.max(24, series.length * 10 + 6);
  const slot = Math.max(8, Math.min(wanted, PLOT_WIDTH / Math.max(1, periods.length)));
  const width = Math.max(480, MARGIN.left + MARGIN.right + periods.length * slot);
  const plotHeight = HEIGHT - MARGIN.top - MARGIN.bottom;
  const scale = plotHeight / (axis.step * axis.count);
  const every = Math.max(1, Math.ceil((periods.length * 44) / (width - MARGIN.left - MARGIN.right)));
  const groups = periods.map((period, i) => {
    const x0 = MARGIN.left + i * slot;
    const boxes = layoutPeriod(byPeriod.get(period), series, x0, slot, scale, stacked);
    return s(
      "g",
      { class: "period", "data-period": period, "data-total": totals.get(period) ?? "0" },
      boxes.map((b) =>
        s(
          "rect",
          { x: b.x, y: b.y, width: b.width, height: b.height, class: `bar series-${b.index % PALETTE}`, "data-period": period, "data-series": b.cell.series, "data-value": b.cell.value },
          s("title", {}, `${period} · ${b.cell.series}: ${b.cell.value} ${unit}`),
        ),
      ),
      i % every === 0 ? s("text", { x: x0 + slot / 2, y: HEIGHT - MARGIN.bottom + 16, class: "tick", "text-anchor": "middle" }, periodLabel(period)) : null,
    );
  });
  const svg = s(
    "svg",
    { viewBox: `0 0 ${width} ${HEIGHT}`, width, height: HEIGHT, role: "img", "aria-label": label, class: "chart" },
    s("title", {}, label),
    axes(width, plotHeight, axis, unit),
    groups,
  );
  const legend = h(
    "ul",
    { class: "legend", "aria-label": `Legend: ${label}` },
    series.map((name, index) =>
      h("li", {}, s("svg", { width: 12, height: 12, "aria-hidden": "true" }, s("rect", { width: 12, height: 12, class: `series-${index % PALETTE}` })), name),
    ),
  );
  const scroller = h("div", { class: "chart-scroll" }, svg);
  // A window wider than the page scrolls; it opens on its latest periods, the ones looked for.
  requestAnimationFrame(() => {
    scroller.scrollLeft = scroller.scrollWidth;
  });
  return h("figure", { class: "chart-box" }, scroller, legend, h("figcaption", {}, label));
}
