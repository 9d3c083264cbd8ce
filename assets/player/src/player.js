/* The player: loads a payload, builds the panes, charts, card and controls, keeps the user's place on a streamed snapshot. */
import { DECODER_COLOURS, PANE_COLOURS, RAMPS } from "./colours.js";
import { el, mixin } from "./dom.js";
import { TraceModel } from "./model.js";
import { Pane } from "./pane.js";
import { Charts } from "./charts.js";
import { HINT, TokenCard } from "./card.js";
import { Clock } from "./clock.js";
import { WallStrip } from "./strip.js";
import { Controls } from "./controls.js";
import { Legend } from "./legend.js";
import { Input } from "./input.js";
import { RegionNav } from "./stages.js";

// ---- the player: controls, panes, charts, tooltip -------------------------------------------
export function listOf(payload) { return payload.mode === "compare" ? payload.panes : [payload]; }
export function streamKey(payload) {
  // the id of a streamed decode (every snapshot of one decode carries it); null: not streamed
  const ids = listOf(payload).map((p) => (p && p.stream != null ? String(p.stream) : null));
  if (!ids.some((v) => v !== null)) return null;
  return (payload.mode === "compare" ? "compare\u0001" : "") + ids.join("\u0001");
}
export const NARROW = "(max-width: 900px)"; // one column: panes stack, the pinned card docks under its pane

export class Player {
  constructor(root) {
    this.root = root;
    root.classList.add("mp");
    root.setAttribute("tabindex", "0");
    this.opts = { colourBy: "confidence", ghosts: true, underline: 0.5, pageView: "text", keepFiller: false };
    this.clock = "forward";
    this.playing = false;
    this.t = 0; // wall-clock position (s)
    this.s = 0; // forward-clock position (frame)
    this.speedForward = 8; // forwards per second
    this.speedWall = 1; // x real time
    this.pinned = null;
    this.streamKey = null;
    this.models = [];
    this.panes = [];
    this._raf = null;
    this.pointer = "mouse"; // the last pointer's type: a touch never opens the floating tooltip
    this.onKey = this.onKey.bind(this);
    this.onPointer = (ev) => { this.pointer = ev.pointerType || "mouse"; };
    root.addEventListener("keydown", this.onKey);
    root.addEventListener("pointerover", this.onPointer, true);
    root.addEventListener("pointerdown", this.onPointer, true);
    // the pinned card docks under its pane on narrow screens: follow a rotation or a resize
    this.onMedia = () => this.placeInspect(this.pinned ? this.pinned.pane : null);
    this.media = typeof window.matchMedia === "function" ? window.matchMedia(NARROW) : null;
    if (this.media && this.media.addEventListener) this.media.addEventListener("change", this.onMedia);
  }
  load(payload) {
    // returns true when the payload was a later snapshot of the decode on screen (same stream id)
    // and the user's place was kept; false when it replaced the result (a caller may scroll to it)
    const ok = !!(payload && payload.kind === "mudiff-player");
    const key = ok ? streamKey(payload) : null;
    if (ok && key !== null && key === this.streamKey && this.models.length && this.panesBox) {
      this.refresh(payload);
      return true;
    }
    this.pause();
    const root = this.root;
    while (root.firstChild) root.removeChild(root.firstChild);
    // every DOM reference cached on the player belongs to the previous result: drop them all (a
    // kept legend would be rebuilt detached, a kept readout text would never be written again)
    this.legend = null;
    this.more = null;
    this._label = null;
    this.pinned = null;
    this.hover = null;
    this.inspect = this.tip = this.strip = this.charts = this.panesBox = this.liveBadge = null;
    this.playBtn = this.scrub = this.clockLabel = this.clockSel = this.speedSel = this.colourSel = null;
    this.stripCursors = [];
    this.stageNav = null;
    this.regionSel = -1;
    this.streamKey = key;
    if (!ok) {
      const empty = el("div", payload && payload.failed ? "mp-empty mp-failed" : "mp-empty",
        payload && payload.message ? payload.message : "Run a decode (or load a trace) to see it here, step by step.");
      if (payload && payload.failed) empty.setAttribute("role", "alert");
      root.appendChild(empty);
      this.models = [];
      this.panes = [];
      return false;
    }
    this.resolveGhostColours();
    const list = listOf(payload);
    this.compare = list.length > 1;
    this.models = list.map((p) => new TraceModel(p));
    if (payload.options) Object.assign(this.opts, payload.options);
    this.link = payload.link && typeof payload.link === "object" ? payload.link : null; // a view the app can reopen
    this.buildControls();
    this.buildLegend();
    const grid = payload.layout === "grid" && list.length > 2;
    this.panesBox = el("div", this.compare ? "mp-panes mp-compare" + (grid ? " mp-grid" : "") : "mp-panes");
    this.panes = this.models.map((m, i) => new Pane(this, m, i, this.compare));
    this.panes.forEach((p) => this.panesBox.appendChild(p.root));
    root.appendChild(this.panesBox);
    this.buildRegionNav(); // a two-stage parse only: the region bar (stages.js)
    this.inspect = el("div", "mp-inspect");
    this.inspect.appendChild(el("div", "mp-inspect-hint", HINT));
    root.appendChild(this.inspect);
    this.strip = el("div", "mp-strip");
    root.appendChild(this.strip);
    this.charts = new Charts(this);
    root.appendChild(this.charts.root);
    this.tip = el("div", "mp-tip");
    this.tip.hidden = true;
    root.appendChild(this.tip);
    this.bindHover();
    this.setLive(list.some((p) => p.partial));
    this.setClock("forward");
    // one opening frame for one trace and for a comparison: the finished result (Play restarts from 0),
    // or the frame a link asked for
    const start = payload.start_frame;
    this.seekFrame(Number.isInteger(start) ? start : this.maxFrame());
    // a showcase (the app's first screen): play from the start at once, again and again until touched
    if (payload.autoplay && !Number.isInteger(start)) {
      if (this.more) this.more.open = false; // the page and the text first; the legend one click away
      this.seekFrame(0); this.loop = true; this.startLoop();
    }
    return false;
  }
  refresh(payload) {
    // the same decode, more frames (a streamed snapshot): rebuild the panes and charts in place and
    // keep the frame or time (or the end, when the user was following it), playing, the options,
    // the pinned token, the focused token and the scroll positions
    const place = this.savePlace();
    this.pause();
    const list = listOf(payload);
    this.models = list.map((p) => new TraceModel(p));
    this.compare = list.length > 1;
    this.resolveGhostColours();
    this.hover = null;
    this.tip.hidden = true;
    this.placeInspect(null);
    const cache = new Map();
    this.panes.forEach((p) => { if (p.img) cache.set(p.img.getAttribute("src"), p.img); });
    this._imgCache = cache;
    this.panes = this.models.map((m, i) => new Pane(this, m, i, this.compare));
    this._imgCache = null;
    this.panesBox.replaceChildren(...this.panes.map((p) => p.root));
    this.bindHover();
    this.buildRegionNav();
    this.updateColourModes();
    this.buildLegend();
    const charts = new Charts(this);
    this.root.replaceChild(charts.root, this.charts.root);
    this.charts = charts;
    this.setLive(list.some((p) => p.partial));
    this.applyClock();
    if (place.following) { this.s = this.maxFrame(); this.t = this.maxTime(); }
    else { this.s = Math.min(place.s, this.maxFrame()); this.t = Math.min(place.t, this.maxTime()); }
    this.redraw(true);
    this.panes.forEach((p, pi) => {
      const sc = place.scroll[pi];
      if (sc) { p.textBox.scrollTop = sc[0]; p.textBox.scrollLeft = sc[1]; p.pageBox.scrollTop = sc[2]; p.pageBox.scrollLeft = sc[3]; }
      const lf = place.lastFocus[pi];
      if (lf != null) { const i = p.m.slotOfKey(lf); if (i >= 0) p.lastFocus = i; }
    });
    if (place.pinned && this.panes[place.pinned.pane]) {
      const i = this.panes[place.pinned.pane].m.slotOfKey(place.pinned.slot);
      if (i >= 0) this.pin(place.pinned.pane, i, null);
      else this.unpin();
    }
    const f = place.focus, fp = f && this.panes[f.pane];
    if (fp) {
      const i = f.slot != null ? fp.m.slotOfKey(f.slot) : -1;
      if (i >= 0 && fp.shown(i)) fp.focusToken(i, true);
      else fp.textBox.focus({ preventScroll: true });
    }
    if (place.playing && !this.atEnd()) this.startLoop();
  }
  savePlace() {
    const ae = document.activeElement;
    let focus = null;
    this.panes.forEach((pane, pi) => {
      if (focus || !ae || !pane.textBox.contains(ae)) return;
      focus = ae === pane.textBox ? { pane: pi } : { pane: pi, slot: ae.dataset && ae.dataset.i != null ? pane.m.slotKey(Number(ae.dataset.i)) : null };
    });
    const pin = this.pinned && this.panes[this.pinned.pane];
    return {
      s: this.s, t: this.t, following: this.atEnd(), playing: this.playing, focus,
      pinned: pin ? { pane: this.pinned.pane, slot: pin.m.slotKey(this.pinned.i) } : null,
      scroll: this.panes.map((p) => [p.textBox.scrollTop, p.textBox.scrollLeft, p.pageBox.scrollTop, p.pageBox.scrollLeft]),
      lastFocus: this.panes.map((p) => (p.lastFocus != null && p.lastFocus >= 0 ? p.m.slotKey(p.lastFocus) : null)),
    };
  }
  resolveGhostColours() {
    // ghost text colours: the theme's text colour faded by confidence (rgba, resolved once: cheap to paint)
    const fg = (getComputedStyle(this.root).color.match(/[\d.]+/g) || [29, 31, 35]).slice(0, 3).map(Number);
    this.ghostColours = RAMPS.confidence.map((_, i) => `rgba(${fg[0]},${fg[1]},${fg[2]},${(0.2 + 0.8 * i / 100).toFixed(2)})`);
  }
  setLive(on) {
    this.partial = !!on;
    if (this.liveBadge) this.liveBadge.hidden = !on;
  }
  colourOf(i) {
    // the pane's own colour if it names one; else its decoder's (as in the plotly figures),
    // unless two panes share a decoder
    if (this.models[i].p.colour) return this.models[i].p.colour;
    const ds = this.models.map((m) => m.p.decoder);
    if (new Set(ds).size === ds.length && DECODER_COLOURS[ds[i]]) return DECODER_COLOURS[ds[i]];
    return PANE_COLOURS[i % PANE_COLOURS.length];
  }
  shortName(m) { return m.p.short || (m.p.decoder === "ar" ? "AR" : m.p.decoder); }
  destroy() {
    this.pause();
    this.root.removeEventListener("keydown", this.onKey);
    this.root.removeEventListener("pointerover", this.onPointer, true);
    this.root.removeEventListener("pointerdown", this.onPointer, true);
    if (this.media && this.media.removeEventListener) this.media.removeEventListener("change", this.onMedia);
  }
}
mixin(Player, Clock, WallStrip, Controls, Legend, TokenCard, Input, RegionNav);
