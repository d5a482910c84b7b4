// The models view: every configured model with its targets, each target's health (as the
// gateway's ejection sees it now) and lifecycle (deprecation, shutdown, replacement).

import * as api from "./api.js";
import { errorBox, h, replace } from "./dom.js";

export const title = "Models";

function lifecycleCells(lifecycle) {
  const l = lifecycle || {};
  return [
    h("td", {}, l.deprecated_at || "—"),
    h("td", {}, l.shutdown_at || "—"),
    h("td", {}, l.replacement || "—"),
  ];
}

function rows(model) {
  const targets = model.targets && model.targets.length ? model.targets : [null];
  return targets.map((target, index) =>
    h(
      "tr",
      { "data-model": model.id },
      index === 0 ? h("th", { scope: "rowgroup", rowspan: targets.length }, model.id) : null,
      index === 0 ? h("td", { rowspan: targets.length }, model.operation || "—") : null,
      h("td", {}, target ? target.provider : "—"),
      h("td", {}, target ? target.native_model : "—"),
      h(
        "td",
        {},
        target
          ? h("span", { class: `status ${target.healthy ? "status-active" : "status-revoked"}` }, target.healthy ? "healthy" : "unhealthy")
          : "—",
      ),
      ...lifecycleCells(target && target.lifecycle),
    ),
  );
}

export async function render(root) {
  const errors = errorBox();
  const list = h("div");
  const load = async () => {
    errors.clear();
    try {
      const models = (await api.get("/models")).data;
      const head = ["Model", "Operation", "Provider", "Native model", "Health", "Deprecated", "Shuts down", "Replacement"];
      replace(
        list,
        models.length
          ? h(
              "table",
              { "aria-label": "Models" },
              h("thead", {}, h("tr", {}, head.map((c) => h("th", { scope: "col" }, c)))),
              models.map((m) => h("tbody", {}, rows(m))),
            )
          : h("p", { class: "empty" }, "No models are configured."),
      );
    } catch (error) {
      errors.show(error);
    }
  };
  replace(
    root,
    h("h1", {}, "Models"),
    errors.element,
    h("button", { type: "button", onclick: load }, "Refresh models"),
    list,
  );
  await load();
}
