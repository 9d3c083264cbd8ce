/* The two-stage parse (a payload with "stages": region 0 is the layout pass, then one decode per
 * block it found; mudiff_viz/views/player.py stages()). The pane draws the blocks' boxes on the page
 * from the layout pass's last forward on, each labelled and linked to its line of text; the player
 * gets a region bar (one chip per region, previous / next) that moves between the regions: choosing
 * one selects its box and its line and shows the frame its decode ended on. A trace without "stages"
 * builds none of this: its DOM is the plain player's. */
import { el, sv, scrollWithin } from "./dom.js";

export function regionName(p, ri) {
  return ri === p.stages.layout ? "Layout pass" : `${ri} ${p.regions[ri].kind}`;
}

function overlaps(a, b) { return a[0] < b[2] && b[0] < a[2] && a[1] < b[3] && b[1] < a[3]; }

function forwardsText(a, b) {
  // forwards as the header counts them: frame s shows forward s (1-based)
  const n = b - a + 1;
  return n === 1 ? `forward ${a + 1}` : `forwards ${a + 1}–${b + 1} (${n} forwards)`;
}

export function regionSummary(p, ri, partial) {
  // one line on what region ri is and where its decode lies on the clock
  const stg = p.stages, st = stg.regions[ri], r = p.regions[ri];
  const nBlocks = p.regions.length - 1;
  if (ri === stg.layout) {
    const where = st.last != null ? forwardsText(st.first, st.last) : "not recorded";
    const found = nBlocks === 0 ? "It found no block." : `It found ${nBlocks === 1 ? "1 block" : nBlocks + " blocks"}: their boxes are drawn on the page once it has ended.`;
    return `Layout pass: the whole page read with the layout prompt${stg.prompt ? ` (${stg.prompt})` : ""}, ${where}. ${found}`;
  }
  const head = `Block ${ri} of ${nBlocks} · ${r.kind}`;
  if (st.last == null) {
    if (st.task == null) return `${head}: shown, not read (blocks of type ${r.kind} are not recognised, as in MinerU's own client).`;
    return `${head}: ${partial ? "not decoded yet" : "not decoded (the time limit ran out first)"}.`;
  }
  const task = st.task ? ` with the ${st.task} prompt` : "";
  const tokens = r.n === 1 ? "1 token" : `${r.n} tokens`;
  return `${head}: its crop of the page read${task}, ${forwardsText(st.first, st.last)}, ${tokens}` +
    (st.continues ? "; its text continues the previous block's." : ".");
}

// Pane methods: the blocks' boxes, labels and lines
export class StageOverlay {
  drawStages() {
    const p = this.m.p, stg = p.stages;
    this.stages = stg;
    this.stageSel = -1;
    this.layoutEnd = stg.regions[stg.layout].last; // a forward; the boxes are known from frame layoutEnd + 1
    this._found = null;
    const [W] = this.pageSize;
    const fs = Math.max(12, 0.024 * W);
    const layer = sv("g", { class: "mp-block-labels" }, this.regionRects[0].parentNode.parentNode);
    this.labelLayer = layer;
    this.blockLabels = p.regions.map((r, ri) => {
      const rect = this.regionRects[ri];
      const st = stg.regions[ri];
      if (ri === stg.layout) return null;
      rect.dataset.kind = r.kind;
      sv("title", {}, rect).textContent = regionName(p, ri);
      // the label sits above its box where that strip is free of other blocks, else inside its top-right corner
      const b = r.bbox, strip = [b[0], b[1] - 1.1 * fs, b[2], b[1]];
      const above = strip[1] >= 0 && !p.regions.some((o, j) => j !== ri && j !== stg.layout && overlaps(strip, o.bbox));
      const at = above ? { x: b[0] + 0.2 * fs, y: b[1] - 0.25 * fs } : { x: b[2] - 0.3 * fs, y: b[1] + 0.95 * fs, "text-anchor": "end" };
      const t = sv("text", { ...at, "font-size": fs, class: "mp-block-label" }, layer);
      t.textContent = regionName(p, ri) + (st.last == null ? " (not read)" : "");
      return t;
    });
    this.lineEls.forEach((line, ri) => {
      const num = line.querySelector(".mp-lineno");
      num.textContent = ri === stg.layout ? "L" : String(ri);
      num.classList.add("mp-lineno-link");
      num.title = "show this region's decode";
      const kind = el("span", "mp-line-kind", p.regions[ri].kind);
      line.insertBefore(kind, num.nextSibling);
      if (stg.regions[ri].last == null) line.appendChild(el("span", "mp-line-note", stg.regions[ri].task == null ? "shown, not read" : "not decoded"));
    });
  }
  layoutFound(s) { return this.layoutEnd == null || s > this.layoutEnd; }
  stageRegion(ri, state, s) {
    // [cache key, class] of region ri's box at frame s: blocks are marked, hidden until the layout
    // pass has ended, and the selected region stands out
    const lay = ri === this.stages.layout, pending = !lay && !this.layoutFound(s), sel = ri === this.stageSel;
    const undecoded = this.stages.regions[ri].last == null;
    const cls = "mp-region rs-" + state + (lay ? " mp-layout" : " mp-block") + (undecoded ? " mp-undecoded" : "") +
      (sel ? " sel-region" : "") + (pending ? " mp-pending" : "");
    return [state + (sel ? 4 : 0) + (pending ? 8 : 0), cls];
  }
  renderStages(s) {
    const found = this.layoutFound(s);
    if (found !== this._found) {
      this._found = found;
      this.labelLayer.classList.toggle("mp-pending", !found);
    }
  }
  showRegion(ri) {
    // region ri is the selected one: its line and label are marked (its box at the next render)
    this.stageSel = ri;
    this.lineEls.forEach((line, j) => line.classList.toggle("mp-line-sel", j === ri));
    this.blockLabels.forEach((t, j) => { if (t) t.classList.toggle("sel", j === ri); });
    this.lastRegion.fill(-1);
  }
  scrollToRegion(ri) {
    // after the frame is drawn (the line's tokens shown): the line's start at the top of the text
    // box (a region's line can be taller than the box: scrolling to its end would miss its start)
    if (ri < 0) return;
    const b = this.textBox.getBoundingClientRect(), r = this.lineEls[ri].getBoundingClientRect();
    this.textBox.scrollTop += r.top - b.top - 4;
    if (ri !== this.stages.layout) scrollWithin(this.pageBox, this.regionRects[ri]);
  }
}

// Player methods: the region bar
export class RegionNav {
  buildRegionNav() {
    // (re)built on every load and streamed refresh; the selection is kept while its region exists
    const old = this.stageNav;
    this.stageNav = null;
    const pane = !this.compare && this.panes.length === 1 ? this.panes[0] : null;
    const p = pane && pane.m.p;
    if (!p || !p.stages) {
      if (old) old.remove();
      this.regionSel = -1;
      return;
    }
    if (this.regionSel == null || this.regionSel >= p.regions.length) this.regionSel = -1;
    const nav = el("div", "mp-stages");
    nav.setAttribute("role", "group");
    nav.setAttribute("aria-label", "regions of the two-stage parse");
    const head = el("div", "mp-stages-head");
    const nBlocks = p.regions.length - 1;
    head.appendChild(el("span", "mp-stages-title", "Two-stage parse"));
    head.appendChild(el("span", "mp-stages-sub", nBlocks === 0 ? "a layout pass that found no block"
      : `a layout pass, then ${nBlocks === 1 ? "its 1 block" : `its ${nBlocks} blocks`} read one at a time on the same clock`));
    const button = (cls, text, label, d) => {
      const b = el("button", "mp-btn " + cls, text);
      b.type = "button";
      b.title = label;
      b.setAttribute("aria-label", label);
      b.addEventListener("click", () => this.stepRegion(d));
      head.appendChild(b);
      return b;
    };
    this.regionPrev = button("mp-region-prev", "‹ Previous region", "Previous region ([)", -1);
    this.regionNext = button("mp-region-next", "Next region ›", "Next region (])", 1);
    nav.appendChild(head);
    const list = el("div", "mp-region-list");
    this.regionChips = p.regions.map((r, ri) => {
      const c = el("button", "mp-region-chip", regionName(p, ri));
      c.type = "button";
      c.dataset.region = String(ri);
      c.setAttribute("aria-pressed", "false");
      if (p.stages.regions[ri].last == null) c.classList.add("undecoded");
      c.addEventListener("click", () => this.selectRegion(ri));
      list.appendChild(c);
      return c;
    });
    nav.appendChild(list);
    this.regionNote = el("div", "mp-region-note");
    this.regionNote.setAttribute("aria-live", "polite");
    nav.appendChild(this.regionNote);
    if (old && old.parentNode) old.replaceWith(nav);
    else this.root.insertBefore(nav, this.panesBox);
    this.stageNav = nav;
    this._liveKey = null;
    // a block's box on the page, or a line's number in the text, chooses its region
    pane.svg.addEventListener("click", (ev) => {
      const t = ev.target.closest ? ev.target.closest(".mp-block") : null;
      if (t) this.selectRegion(Number(t.dataset.region));
    });
    pane.textBox.addEventListener("click", (ev) => {
      const t = ev.target.closest ? ev.target.closest(".mp-lineno-link") : null;
      if (t) this.selectRegion(Number(t.parentNode.dataset.region));
    });
    this.showRegionSel();
  }
  showRegionSel() {
    const pane = this.panes[0], p = pane.m.p, ri = this.regionSel;
    this.regionChips.forEach((c, j) => c.setAttribute("aria-pressed", String(j === ri)));
    this.regionPrev.disabled = ri === 0; // nothing chosen yet: previous goes to the last region, next to the first
    this.regionNext.disabled = ri === p.regions.length - 1;
    this.regionNote.textContent = ri < 0
      ? "Choose a region (or click its box on the page, or its line number) to see its own decode."
      : regionSummary(p, ri, this.partial);
    pane.showRegion(ri);
  }
  selectRegion(ri) {
    // region ri: selected, and the clock on the frame its decode ended (a region not read: the
    // frame the layout pass ended, where its box appears)
    if (!this.stageNav) return;
    const p = this.panes[0].m.p, stg = p.stages;
    if (!(ri >= 0 && ri < p.regions.length)) return;
    this.regionSel = ri;
    this.pause();
    this.showRegionSel();
    const st = stg.regions[ri], end = st.last != null ? st.last : stg.regions[stg.layout].last;
    this.seekFrame(end != null ? end + 1 : this.s);
    this.panes[0].scrollToRegion(ri);
  }
  stepRegion(d) {
    if (!this.stageNav) return;
    const n = this.panes[0].m.p.regions.length, ri = this.regionSel;
    this.selectRegion(ri < 0 ? (d > 0 ? 0 : n - 1) : Math.max(0, Math.min(n - 1, ri + d)));
  }
  renderRegionNav() {
    // the chip of the region decoding at this frame is marked as it plays
    const pane = this.panes[0], live = pane.activeRegions(pane.frame);
    const key = Array.from(live).join();
    if (key === this._liveKey) return;
    this._liveKey = key;
    this.regionChips.forEach((c, j) => c.classList.toggle("live", live.has(j)));
  }
}
