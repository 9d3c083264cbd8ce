/* The decoded text of a pane: one span per slot, and keyboard navigation over them (roving tabindex). */
import { UNREACHED, HIDDEN } from "./states.js";
import { el, scrollWithin } from "./dom.js";

// Pane methods: the text box
export class TokenText {
  buildText() {
    const m = this.m, p = m.p, s = p.slots;
    this.spans = new Array(m.n);
    const frag = document.createDocumentFragment();
    this.lineEls = [];
    this.lineSlots = []; // per line: its slots in text order (keyboard navigation)
    this.slotLine = new Int32Array(m.n);
    this.slotCol = new Int32Array(m.n);
    // after each region's tokens: its filler and (a streamed snapshot) the block still decoding
    const fillerByRegion = p.regions.map(() => []);
    const nTokens = p.regions.reduce((a, r) => a + r.n, 0);
    for (let i = nTokens; i < m.n; i++) fillerByRegion[s.region[i]].push(i);
    p.regions.forEach((r, ri) => {
      const line = el("div", "mp-line");
      line.dataset.region = String(ri);
      const num = el("span", "mp-lineno", String(ri + 1));
      line.appendChild(num);
      const toks = el("span", "mp-toks");
      const order = [];
      const add = (i) => {
        const sp = el("span", m.filler[i] ? "filler" : "token");
        sp.dataset.i = String(i);
        sp.setAttribute("tabindex", "-1");
        toks.appendChild(sp);
        this.spans[i] = sp;
        this.slotLine[i] = ri;
        this.slotCol[i] = order.length;
        order.push(i);
      };
      for (let k = 0; k < r.n; k++) add(r.start + k);
      fillerByRegion[ri].forEach(add);
      this.lineSlots.push(order);
      line.appendChild(toks);
      frag.appendChild(line);
      this.lineEls.push(line);
    });
    this.textBox.appendChild(frag);
  }
  // ----- keyboard: roving tabindex over the tokens of the text box
  shown(i) { const st = this.m.state[i]; return i >= 0 && i < this.m.n && st !== UNREACHED && st !== HIDDEN; }
  focusToken(i, quiet) {
    // the roving tab stop moves to token i (quiet: it already has the focus, or keep every scroll)
    const prev = this.focusI;
    if (prev >= 0 && prev !== i && this.spans[prev]) this.spans[prev].setAttribute("tabindex", "-1");
    this.focusI = i;
    this.lastFocus = i;
    const sp = this.spans[i];
    sp.setAttribute("tabindex", "0");
    this.textBox.setAttribute("tabindex", "-1");
    if (document.activeElement !== sp) sp.focus({ preventScroll: true });
    if (quiet) return;
    scrollWithin(this.textBox, sp);
    const r = sp.getBoundingClientRect();
    if (r.top < 0 || r.bottom > window.innerHeight) sp.scrollIntoView({ block: "nearest", inline: "nearest" });
  }
  leaveTokens() {
    // the text box is the one tab stop again; the last token is remembered for the next arrow key
    if (this.focusI >= 0 && this.spans[this.focusI]) this.spans[this.focusI].setAttribute("tabindex", "-1");
    this.focusI = -1;
    this.textBox.setAttribute("tabindex", "0");
  }
  navigate(key, i) {
    // the slot the focus moves to from slot i (-1: from the text box itself); i when there is none
    const L = this.lineSlots;
    if (i < 0) {
      if (key !== "Home" && key !== "End") {
        for (const j of [this.lastFocus, this.selected]) if (j != null && this.shown(j)) return j;
      }
      const dir = key === "End" ? -1 : 1;
      for (let li = dir > 0 ? 0 : L.length - 1; li >= 0 && li < L.length; li += dir) {
        const line = L[li];
        for (let c = dir > 0 ? 0 : line.length - 1; c >= 0 && c < line.length; c += dir) if (this.shown(line[c])) return line[c];
      }
      return -1;
    }
    const li = this.slotLine[i], line = L[li];
    if (key === "Home" || key === "End") {
      const dir = key === "Home" ? 1 : -1;
      for (let c = dir > 0 ? 0 : line.length - 1; c >= 0 && c < line.length; c += dir) if (this.shown(line[c])) return line[c];
      return i;
    }
    if (key === "ArrowLeft" || key === "ArrowRight") {
      const dir = key === "ArrowRight" ? 1 : -1;
      let l = li, c = this.slotCol[i] + dir;
      for (;;) {
        if (c < 0 || c >= L[l].length) {
          l += dir;
          if (l < 0 || l >= L.length) return i;
          c = dir > 0 ? 0 : L[l].length - 1;
          continue;
        }
        if (this.shown(L[l][c])) return L[l][c];
        c += dir;
      }
    }
    return this.verticalTarget(i, key === "ArrowDown" ? 1 : -1);
  }
  verticalTarget(i, dir) {
    // the token on the next (previous) visual row nearest in x: wrapped lines count as rows
    const L = this.lineSlots;
    const cur = this.spans[i].getBoundingClientRect();
    const cx = (cur.left + cur.right) / 2;
    let l = this.slotLine[i], c = this.slotCol[i], row = null, best = -1, bestD = Infinity;
    for (let guard = 0; guard < 4000; guard++) {
      c += dir;
      if (c < 0 || c >= L[l].length) {
        l += dir;
        if (l < 0 || l >= L.length) break;
        c = dir > 0 ? -1 : L[l].length;
        continue;
      }
      const j = L[l][c];
      if (!this.shown(j)) continue;
      const r = this.spans[j].getBoundingClientRect();
      if (!r.height) continue;
      const mid = (r.top + r.bottom) / 2;
      if (row === null) {
        if (dir > 0 ? mid <= cur.bottom : mid >= cur.top) continue; // still on the current row
        row = mid;
      } else if (Math.abs(mid - row) > r.height / 2) break; // past the target row
      const d = Math.abs((r.left + r.right) / 2 - cx);
      if (d < bestD) { bestD = d; best = j; }
    }
    return best >= 0 ? best : i;
  }
}
