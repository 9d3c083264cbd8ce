/* Small DOM helpers. Model text goes through textContent or setAttribute: it is never parsed as markup. */
// ---- small DOM helpers ---------------------------------------------------------------------
export const SVGNS = "http://www.w3.org/2000/svg";
export function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}
export function sv(tag, attrs, parent) {
  const e = document.createElementNS(SVGNS, tag);
  if (attrs) for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (parent) parent.appendChild(e);
  return e;
}
export const ICONS = {
  "to-start": "M1 3h2v10H1z M9 3v10L3 8z M15 3v10L9 8z",
  "step-back": "M2 3h2v10H2z M13 3v10L6 8z",
  "step-fwd": "M3 3v10l7-5z M12 3h2v10h-2z",
  "to-end": "M1 3v10l6-5z M7 3v10l6-5z M13 3h2v10h-2z",
  play: "M4 2.5v11l9-5.5z",
  pause: "M3.5 3h3v10h-3z M9.5 3h3v10h-3z",
};
export function icon(name) {
  const s = sv("svg", { viewBox: "0 0 16 16", width: 14, height: 14, class: "mp-icon", "aria-hidden": "true" });
  sv("path", { d: ICONS[name], fill: "currentColor" }, s);
  return s;
}
export function scrollWithin(box, target) {
  // scroll the box (not the window) so that the target is inside it, with a small margin
  const b = box.getBoundingClientRect(), r = target.getBoundingClientRect(), pad = 12;
  if (!b.height || !r.height) return;
  if (r.top < b.top + pad) box.scrollTop -= b.top + pad - r.top;
  else if (r.bottom > b.bottom - pad) box.scrollTop += Math.min(r.bottom - b.bottom + pad, r.top - b.top - pad);
  if (r.left < b.left + pad) box.scrollLeft -= b.left + pad - r.left;
  else if (r.right > b.right - pad) box.scrollLeft += Math.min(r.right - b.right + pad, r.left - b.left - pad);
}
// A class's methods spread over modules by concern: copy each method group onto the class
export function mixin(target, ...groups) {
  for (const g of groups) {
    for (const k of Object.getOwnPropertyNames(g.prototype)) {
      if (k !== "constructor") Object.defineProperty(target.prototype, k, Object.getOwnPropertyDescriptor(g.prototype, k));
    }
  }
}
