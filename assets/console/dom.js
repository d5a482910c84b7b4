// Building the page from data without HTML strings: every text goes in as a text node, so
// nothing the API returns (a tenant's description, a model's name) is ever parsed as markup.

const SVG_NS = "http://www.w3.org/2000/svg";
let nextId = 0;

/** A fresh id for pairing a <label> with its control. */
export function uid(prefix = "f") {
  nextId += 1;
  return `${prefix}-${nextId}`;
}

function apply(el, attrs) {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      el.addEventListener(name.slice(2), value);
    } else if (name === "value" || name === "checked" || name === "selected") {
      el[name] = value;
    } else {
      el.setAttribute(name, value === true ? "" : String(value));
    }
  }
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** An HTML element: h("button", {type: "button", onclick}, "Revoke"). */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  apply(el, attrs);
  append(el, children);
  return el;
}

/** An SVG element, the same way. */
export function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  apply(el, attrs);
  append(el, children);
  return el;
}

/** Replaces what a node holds. */
export function replace(node, ...children) {
  node.replaceChildren();
  append(node, children);
}

/** A labelled control: the label's `for` names the control, so it is found by its label. */
export function field(label, control, hint) {
  if (!control.id) control.id = uid();
  const parts = [h("label", { for: control.id }, label), control];
  if (hint) {
    const hintId = uid("hint");
    control.setAttribute("aria-describedby", hintId);
    parts.push(h("small", { id: hintId, class: "hint" }, hint));
  }
  return h("div", { class: "field" }, parts);
}

/**
 * The place a view shows what went wrong: the API's `message`, and for a 400 each field's text
 * from `details`. Empty (and so silent) until something fails.
 */
export function errorBox() {
  const box = h("div", { role: "alert", class: "error", hidden: true });
  return {
    element: box,
    show(error) {
      const details = error && error.details ? Object.entries(error.details) : [];
      replace(
        box,
        h("p", {}, error && error.message ? error.message : String(error)),
        details.length
          ? h("ul", {}, details.map(([key, text]) => h("li", {}, h("code", {}, key), ": ", text)))
          : null,
      );
      box.hidden = false;
    },
    clear() {
      box.replaceChildren();
      box.hidden = true;
    },
  };
}

/** A short UTC rendering of an RFC 3339 time ("2026-12-04 01:27 UTC"), or "—". */
export function when(value) {
  if (!value) return "—";
  const date = new Date(value);
  if (Number.isNaN(date.getTime())) return value;
  return `${date.toISOString().slice(0, 16).replace("T", " ")} UTC`;
}

/**
 * Asks before something that cannot be undone, in a modal <dialog> (a role the test and a screen
 * reader can find). Resolves to true when the action button was pressed.
 */
export function confirmDialog({ title, text, action, body }) {
  return new Promise((resolve) => {
    const titleId = uid("dialog");
    const dialog = h("dialog", { "aria-labelledby": titleId, class: "confirm" });
    const finish = (answer) => {
      dialog.close();
      dialog.remove();
      resolve(answer);
    };
    dialog.append(
      h("h2", { id: titleId }, title),
      h("p", {}, text),
      body || null,
      h(
        "div",
        { class: "actions" },
        h("button", { type: "button", class: "danger", onclick: () => finish(true) }, action),
        h("button", { type: "button", class: "secondary", onclick: () => finish(false) }, "Cancel"),
      ),
    );
    dialog.addEventListener("cancel", (event) => {
      event.preventDefault();
      finish(false);
    });
    document.body.append(dialog);
    dialog.showModal();
  });
}
