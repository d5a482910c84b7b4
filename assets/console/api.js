// The management API client. The admin credential lives in sessionStorage (this tab only, gone
// when it closes) and goes out as an `Authorization: Bearer` header on each call; no cookie is
// ever set or sent (`credentials: "omit"`), so another site cannot make the browser act as the
// operator: there is no CSRF surface.

const STORAGE_KEY = "switchyard.console.credential";
const BASE = "/admin/v1";

/** An answer other than 2xx, in the API's error shape: `{code, message, details?}`. */
export class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details || null;
  }
}

export function credential() {
  return sessionStorage.getItem(STORAGE_KEY);
}

export function saveCredential(value) {
  sessionStorage.setItem(STORAGE_KEY, value);
}

export function forgetCredential() {
  sessionStorage.removeItem(STORAGE_KEY);
}

let unauthorized = () => {};

/** What to do when the stored credential is refused (the app goes back to its login view). */
export function onUnauthorized(handler) {
  unauthorized = handler;
}

async function parse(response) {
  const text = await response.text();
  if (!text) return null;
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

/**
 * One call: `request("POST", "/keys", {tenant, name})`. Resolves to the parsed body; rejects with
 * an ApiError carrying the API's own message (or a plain one when the answer is not JSON).
 * `token` overrides the stored credential (the login check, before anything is stored).
 */
export async function request(method, path, body, token) {
  const bearer = token ?? credential();
  const headers = { Accept: "application/json" };
  if (bearer) headers.Authorization = `Bearer ${bearer}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(BASE + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "omit",
      cache: "no-store",
    });
  } catch (error) {
    throw new ApiError(0, "network_error", `The management API did not answer (${error.message}).`);
  }
  const data = await parse(response);
  if (response.ok) return data;
  const code = data && data.code ? data.code : `http_${response.status}`;
  const message =
    data && data.message ? data.message : `The management API answered ${response.status}.`;
  const error = new ApiError(response.status, code, message, data && data.details);
  if (response.status === 401 && token === undefined) unauthorized(error);
  throw error;
}

export const get = (path) => request("GET", path);
export const post = (path, body = {}) => request("POST", path, body);
export const patch = (path, body) => request("PATCH", path, body);

/** A path segment or query value, escaped. */
export const enc = encodeURIComponent;
