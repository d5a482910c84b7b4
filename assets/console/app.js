// The console's shell: the login view (the admin key or admin JWT, checked with
// `GET /admin/v1/whoami` before it is kept in sessionStorage), then a header with the views
// (#/keys, #/tenants, #/spend, #/models) and the one shown below it.

import * as api from "./api.js";
import { errorBox, field, h, replace } from "./dom.js";
import * as keys from "./keys.js";
import * as models from "./models.js";
import * as spend from "./spend.js";
import * as tenants from "./tenants.js";

const VIEWS = { keys, tenants, spend, models };
const app = document.getElementById("app");
let who = null;

function login(reason) {
  who = null;
  const errors = errorBox();
  const secret = h("input", { type: "password", required: true, autocomplete: "off", spellcheck: "false" });
  const form = h(
    "form",
    { class: "card login", "aria-label": "Sign in" },
    h("h1", {}, "Switchyard console"),
    h("p", {}, "Sign in with an admin key or an admin JWT. It is kept in this tab only, until you sign out or close it."),
    errors.element,
    field("Admin key", secret),
    h("button", { type: "submit" }, "Sign in"),
  );
  if (reason) errors.show(reason);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    errors.clear();
    const token = secret.value.trim();
    try {
      who = await api.request("GET", "/whoami", undefined, token);
      api.saveCredential(token);
      secret.value = "";
      // Without a hashchange event: shell() below draws the view once.
      if (!location.hash) history.replaceState(null, "", "#/keys");
      shell();
    } catch (error) {
      errors.show(error);
    }
  });
  replace(app, h("main", { class: "narrow" }, form));
  secret.focus();
}

function signOut() {
  api.forgetCredential();
  login(null);
}

function currentView() {
  const name = location.hash.replace(/^#\/?/, "").split(/[/?]/)[0];
  return VIEWS[name] ? name : "keys";
}

function shell() {
  const name = currentView();
  const nav = h(
    "nav",
    { "aria-label": "Console" },
    h(
      "ul",
      {},
      Object.entries(VIEWS).map(([id, view]) =>
        h("li", {}, h("a", { href: `#/${id}`, "aria-current": id === name ? "page" : null }, view.title)),
      ),
    ),
  );
  const main = h("main", { id: "view" });
  replace(
    app,
    h(
      "header",
      {},
      h("span", { class: "brand" }, "Switchyard"),
      nav,
      h(
        "div",
        { class: "who" },
        h("span", {}, `Signed in as ${who.admin} (${who.via})`),
        h("button", { type: "button", onclick: signOut }, "Sign out"),
      ),
    ),
    main,
  );
  document.title = `${VIEWS[name].title} · Switchyard console`;
  VIEWS[name].render(main);
}

api.onUnauthorized((error) => {
  api.forgetCredential();
  login(error);
});

window.addEventListener("hashchange", () => {
  if (who) shell();
});

async function start() {
  const stored = api.credential();
  if (!stored) {
    login(null);
    return;
  }
  try {
    who = await api.request("GET", "/whoami", undefined, stored);
    shell();
  } catch (error) {
    if (error.status === 401) api.forgetCredential();
    login(error.status === 401 ? null : error);
  }
}

start();
