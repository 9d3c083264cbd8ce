/* One pane: header, text and page overlay of one trace, drawn at a frame. */
import { RAMPS } from "./colours.js";
import { UNREACHED, MASKED, GHOST, NOW, DONE, HIDDEN, DRAFT, DISCARDED, STATE_CLASS, VERDICT_CLASS, V_REJECTED } from "./states.js";
import { el, sv, mixin, scrollWithin } from "./dom.js";
import { MASK_GLYPH, FILLER_GLYPH, SPECIAL, EOS_MARK, displayToken } from "./format.js";
import { TokenText } from "./tokens.js";
import { PageOverlay } from "./page.js";
import { PaneHeader } from "./header.js";
import { StageOverlay } from "./stages.js";

// "verdict" colour mode: the ramp index of a committed token's verdict (none, drafted, accepted,
// rejected, discarded, bonus): accepted drafts one end, the verifier's corrections the other
const VERDICT_RAMP_INDEX = [50, 50, 100, 0, 50, 50];

// draft and verify: a one-line key of the draft states under the caption, on every screen (the full
// legend folds away on phones), so that a struck-through token reads as a rejected draft at once
const DRAFT_KEY = [["st-draft", "d", "draft"], ["st-now v-accepted", "a", "accepted"],
  ["st-now v-rejected", "b", "rejected, then the verifier's token"], ["st-discarded", "c", "discarded"], ["st-now v-bonus", "e", "bonus"]];
function draftKey() {
  const key = el("div", "mp-draft-key");
  key.appendChild(el("span", "mp-draft-key-title", "Drafts:"));
  DRAFT_KEY.forEach(([cls, sample, label]) => {
    const item = el("span", "mp-legend-item");
    const sw = el("span", "mp-swatch " + cls, sample);
    if (cls.startsWith("st-now")) { sw.style.background = RAMPS.confidence[90].bg; sw.style.color = RAMPS.confidence[90].fg; }
    if (cls === "st-now v-rejected") sw.dataset.draft = "x";
    item.appendChild(sw);
    item.appendChild(el("span", "", label));
    key.appendChild(item);
  });
  return key;
}

// ---- one pane: header, text, page overlay --------------------------------------------------
export class Pane {
  constructor(player, model, index, compact) {
    this.player = player;
    this.m = model;
    this.index = index;
    const p = model.p;
    this.root = el("div", "mp-pane");
    this.root.dataset.pane = String(index);
    const head = el("div", "mp-pane-head");
    const title = el("div", "mp-pane-title");
    const dot = el("span", "mp-dot");
    dot.style.background = player.colourOf(index);
    if (p.dash) { dot.classList.add("mp-dot-dash"); dot.style.borderColor = player.colourOf(index); }
    title.appendChild(dot);
    title.appendChild(el("span", "mp-pane-label", p.label || p.decoder));
    // a region stopped at its token limit, not at a stop token (trace metrics.truncated): the text is cut
    const cut = p.metrics && p.metrics.truncated;
    if (cut) title.appendChild(el("span", "mp-cut", `⚠ ${cut}`));
    head.appendChild(title);
    this.header = el("div", "mp-header");
    this.header.setAttribute("aria-live", "off");
    head.appendChild(this.header);
    this.caption = el("div", "mp-caption");
    head.appendChild(this.caption);
    if (model.speculative) head.appendChild(draftKey());
    this.root.appendChild(head);
    const body = el("div", compact ? "mp-body mp-body-compact" : "mp-body");
    this.pageBox = el("div", "mp-page");
    this.textBox = el("div", "mp-text");
    // one tab stop; arrow keys then move a focus ring from token to token (roving tabindex)
    this.textBox.setAttribute("tabindex", "0");
    this.textBox.setAttribute("role", "group");
    this.textBox.setAttribute("aria-label", "decoded text: arrow keys move between tokens, Enter pins a token's card, Escape unpins");
    this.focusI = -1; // the token holding the roving tab stop (-1: the text box holds it)
    this.lastFocus = -1;
    this.selected = -1;
    body.appendChild(this.pageBox);
    body.appendChild(this.textBox);
    this.root.appendChild(body);
    this.stages = null; // a two-stage parse's stages (set by drawStages)
    this.buildText();
    this.buildPage();
    this.lastKey = new Float64Array(model.n).fill(-1);
    this.lastRect = new Float64Array(model.n).fill(-1);
    this.lastRegion = new Int8Array(p.regions.length).fill(-1);
  }
  render(s, opts) {
    const m = this.m, p = m.p;
    s = m.compute(s, !!opts.keepFiller);
    this.frame = s;
    const st = m.state, ea = m.entryAt;
    const colourBy = opts.colourBy, ramp = RAMPS[colourBy] || RAMPS.confidence;
    const correct = p.slots.correct;
    // an imported release output has no confidences: nothing is underlined as low-confidence
    const N = Math.max(1, m.N - 1), under = p.params && p.params.imported_from ? -1 : opts.underline, ghosts = opts.ghosts;
    const occl = m.occluded;
    // draft and verify: the verdict this forward gave a position (-1: none, or not such a trace)
    const spec = m.speculative, va = spec ? m.verdictAt : null;
    for (let i = 0; i < m.n; i++) {
      let state = st[i];
      const e = ea[i];
      let cand = -1, conf = 0;
      if (state === GHOST || state === DRAFT) {
        if (ghosts) { cand = m.ecand[e]; conf = m.econf[e]; } else state = MASKED;
      } else if (state === DISCARDED) {
        cand = m.edraft[e];
      } else if (state === NOW || state === DONE) {
        conf = m.conf[i];
      }
      let ci = 0;
      if (state === NOW || state === DONE) {
        ci = colourBy === "commit" ? Math.round(100 * m.commit[i] / N)
          : colourBy === "correct" ? (correct && correct[i] >= 0 ? 100 * correct[i] : 50)
          : colourBy === "verdict" ? (spec ? VERDICT_RAMP_INDEX[m.finalVerdict[i] + 1] : 50) : Math.round(100 * conf);
      }
      else if (state === GHOST || state === DRAFT) ci = Math.round(100 * conf);
      const low = (state === NOW || state === DONE) && conf < under ? 1 : 0;
      const verdict = spec && state === NOW ? va[i] : -1; // marked on the frame that committed it
      let key = state + 8 * (ci + 128 * (low + 2 * (cand + 1)));
      if (spec) key += 1e9 * (verdict + 1);
      if (key !== this.lastKey[i]) {
        this.lastKey[i] = key;
        const sp = this.spans[i];
        let raw = null;
        if (state === NOW || state === DONE) raw = m.stop[i] || m.filler[i] ? m.tokenText(m.ids[i]) : p.slots.text[i];
        else if (state === GHOST || state === DRAFT || state === DISCARDED) raw = m.tokenText(cand);
        let cls = (m.filler[i] ? "filler " : "token ") + STATE_CLASS[state];
        if (low) cls += " low";
        if (m.stop[i] || (raw !== null && SPECIAL.test(raw))) cls += " special";
        if (occl[i]) cls += " occ";
        if (this.selected === i) cls += " sel";
        if (verdict >= 0) cls += " " + VERDICT_CLASS[verdict];
        sp.className = cls;
        if (spec) {
          // a rejected draft: struck through (CSS, from this attribute), then the verifier's token
          if (verdict === V_REJECTED) sp.dataset.draft = displayToken(m.tokenText(m.edraft[m.verifiedAt[i]]));
          else if (sp.dataset.draft !== undefined) delete sp.dataset.draft;
        }
        if ((state === NOW || state === DONE) && m.filler[i]) {
          // a position after the end-of-text token: the model committed it, the text discards it;
          // one grey pip each keeps the block's work visible without drowning the line in "EOS EOS"
          sp.style.background = "";
          sp.style.color = "";
          sp.textContent = FILLER_GLYPH;
        } else if (state === NOW || state === DONE) {
          const c = ramp[ci];
          sp.style.background = c.bg;
          sp.style.color = c.fg;
          sp.textContent = m.stop[i] ? EOS_MARK : displayToken(raw);
        } else if (state === GHOST || state === DRAFT) {
          sp.style.background = "";
          sp.style.color = this.player.ghostColours[ci];
          sp.textContent = displayToken(raw);
        } else if (state === DISCARDED) {
          sp.style.background = "";
          sp.style.color = "";
          sp.textContent = displayToken(raw);
        } else {
          sp.style.background = "";
          sp.style.color = "";
          sp.textContent = state === MASKED ? MASK_GLYPH : "";
        }
        const r = this.rects[i];
        if (r) {
          let rc = "mp-box " + STATE_CLASS[state];
          if (low) rc += " low";
          if (occl[i]) rc += " occ";
          if (this.selected === i) rc += " sel";
          if (verdict >= 0) rc += " " + VERDICT_CLASS[verdict];
          r.setAttribute("class", rc);
          if (state === NOW || state === DONE) r.setAttribute("fill", ramp[ci].solid);
          else if (state === GHOST || state === DRAFT) { r.setAttribute("fill", RAMPS.confidence[ci].solid); r.setAttribute("fill-opacity", String(0.1 + 0.35 * conf)); }
          else r.removeAttribute("fill");
          if (state !== GHOST && state !== DRAFT) r.removeAttribute("fill-opacity");
        }
      }
    }
    if (this.strikeLayer && this._struckAt !== s) this.strikeRejected(s);
    // region boxes: active (decoding at this forward) / done / waiting
    const active = this.activeRegions(s);
    p.regions.forEach((r, ri) => {
      const first = r.start, lastSlot = r.start + r.n - 1;
      let state = 0;
      if (active.has(ri)) state = 2;
      else if (r.n > 0 && m.commit[lastSlot] >= 0 && m.commit[lastSlot] < s) state = 3;
      else if (r.n > 0 && m.open[first] <= s) state = 1;
      const [key, cls] = this.stages ? this.stageRegion(ri, state, s) : [state, null];
      if (key !== this.lastRegion[ri]) {
        this.lastRegion[ri] = key;
        this.regionRects[ri].setAttribute("class", cls || "mp-region rs-" + state);
        this.lineEls[ri].classList.toggle("active", state === 2);
      }
    });
    if (this.stages) this.renderStages(s);
    this.renderHeader(s);
    // a focused token that scrubbing hid (not reached yet): keep the focus in the text box
    const fi = this.focusI;
    if (fi >= 0 && (st[fi] === UNREACHED || st[fi] === HIDDEN) && document.activeElement === this.spans[fi]) {
      this.spans[fi].setAttribute("tabindex", "-1");
      this.focusI = -1;
      this.textBox.setAttribute("tabindex", "0");
      this.textBox.focus({ preventScroll: true });
    }
  }
  strikeRejected(s) {
    // one line through the box of each draft this frame's forward rejected (the text strikes the
    // draft itself; on the page the box shows where)
    const m = this.m, layer = this.strikeLayer, boxes = m.p.slots.box;
    this._struckAt = s;
    while (layer.firstChild) layer.removeChild(layer.firstChild);
    for (let i = 0; i < m.n; i++) {
      const b = boxes[i];
      if (!b || m.state[i] !== NOW || m.verdictAt[i] !== V_REJECTED) continue;
      const line = sv("line", { x1: b[0], x2: b[2], y1: (b[1] + b[3]) / 2, y2: (b[1] + b[3]) / 2, class: "mp-strike" }, layer);
      line.dataset.i = String(i);
    }
  }
  activeRegions(s) {
    const m = this.m, set = new Set();
    if (s >= 1 && s <= m.N) for (let e = m.tickStart[s - 1]; e < m.tickStart[s]; e++) set.add(m.p.slots.region[m.eslot[e]]);
    return set;
  }
  select(i, scroll) {
    const prev = this.selected;
    this.selected = i;
    if (prev != null && prev >= 0) {
      this.spans[prev] && this.spans[prev].classList.remove("sel");
      this.rects[prev] && this.rects[prev].classList.remove("sel");
      this.lastKey[prev] = -1;
    }
    if (i == null || i < 0) return;
    const sp = this.spans[i], r = this.rects[i];
    sp && sp.classList.add("sel");
    r && r.classList.add("sel");
    this.lastKey[i] = -1;
    // scroll only the panel that shows it: the window stays where the user put it
    if (scroll === "text" && sp) scrollWithin(this.textBox, sp);
    if (scroll === "page" && r) scrollWithin(this.pageBox, r);
  }
}
mixin(Pane, TokenText, PageOverlay, PaneHeader, StageOverlay);
