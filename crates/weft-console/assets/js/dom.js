// Small DOM helpers, so the panels build their nodes without innerHTML
// (entry payloads and tags are user data and must never become markup).

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value == null) continue;
    if (name === "class") node.className = value;
    else if (name.startsWith("data-")) node.setAttribute(name, value);
    else node[name] = value;
  }
  for (const child of children) {
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

export function setField(container, field, text) {
  const node = container.querySelector(`[data-field="${field}"]`);
  if (node) node.textContent = text;
}

// The error banner. `source` names who raised it, so a later success of
// the same kind clears it without hiding another panel's error.
export function showError(message, source = "action") {
  const banner = document.getElementById("error");
  banner.textContent = message;
  banner.dataset.source = source;
  banner.hidden = false;
}

export function clearError(source) {
  const banner = document.getElementById("error");
  if (source && banner.dataset.source !== source) return;
  banner.hidden = true;
  banner.textContent = "";
  delete banner.dataset.source;
}

export function describeError(err) {
  return err && err.kind ? `${err.kind}: ${err.message}` : String(err);
}
