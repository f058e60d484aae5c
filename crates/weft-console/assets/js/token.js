// The bearer token typed into the page. Kept in sessionStorage: it lives
// as long as the tab and is never written to disk by the page.

const KEY = "weft.console.token";
const listeners = [];

export function token() {
  try {
    return sessionStorage.getItem(KEY) || "";
  } catch {
    return "";
  }
}

export function setToken(value) {
  try {
    if (value) sessionStorage.setItem(KEY, value);
    else sessionStorage.removeItem(KEY);
  } catch {
    // Storage refused (a locked-down browser): the token lasts until reload.
  }
  for (const listener of listeners) listener(value);
}

export function onTokenChange(listener) {
  listeners.push(listener);
}
