/* mudiff-viz player: replays a whole decode trace in the browser, frame by frame.
 *
 * Input: the payload built by mudiff_viz/views/player.py (one trace), or {mode: "compare", panes:
 * [payload, ...]} for two or more traces on one shared clock; {layout: "grid"} lays four of them out
 * 2x2 (the Semantic Shuffle tab), and {options: {colourBy: ...}} picks the starting colour mode.
 * A pane may carry "short" (its name in chart readouts), "colour" and "dash" (its chart style). Everything is computed here from that one
 * payload: no server round trip per frame.
 *
 * Streaming: a payload with "stream" (an id) and "partial": true is a snapshot of a decode still
 * running; load() (or a second MudiffPlayer.mount on the same element, which reuses the player) with
 * the same stream id keeps the user's place (frame or time, playing, options, pinned and focused
 * token; at the last frame it follows the new end) and returns true. A "decoding… (live)" badge
 * shows while partial. Block-wise traces are told by "block_length" (AR has none), not by name.
 *
 * Frames: s = 0..N. Frame 0 is the start of decoding (prefill done, nothing committed); frame s > 0
 * shows the outcome of forward s-1: what it committed and the guesses it left on masked positions.
 * Wall-time clock: time t maps to the number of forwards finished by t.
 *
 * Model text is data, never markup: every string from the trace goes through textContent or
 * setAttribute. Never innerHTML.
 */
(function (global) {
  "use strict";

  // ---- colour ramps (colour-blind safe) -------------------------------------------------------
  const CIVIDIS = [[0, 34, 78], [18, 53, 112], [59, 73, 108], [87, 93, 109], [112, 113, 115],
    [138, 134, 120], [165, 156, 116], [195, 179, 105], [225, 204, 85], [255, 234, 70]];
  const VIRIDIS = [[68, 1, 84], [72, 40, 120], [62, 74, 137], [49, 104, 142], [38, 130, 142],
    [31, 158, 137], [53, 183, 121], [110, 206, 88], [181, 222, 43], [253, 231, 37]];
  const RAMP_STEPS = 101;

  function buildRamp(stops, towardWhite) {
    const out = [];
    for (let i = 0; i < RAMP_STEPS; i++) {
      const t = i / (RAMP_STEPS - 1);
      const x = t * (stops.length - 1);
      const j = Math.min(stops.length - 2, Math.floor(x));
      const f = x - j;
      const c = [0, 1, 2].map((k) => stops[j][k] + (stops[j + 1][k] - stops[j][k]) * f);
      const m = c.map((v) => Math.round(v + (255 - v) * towardWhite));
      const lum = (0.2126 * m[0] + 0.7152 * m[1] + 0.0722 * m[2]) / 255;
      out.push({ bg: `rgb(${m[0]},${m[1]},${m[2]})`, fg: lum < 0.5 ? "#fff" : "#111",
        solid: `rgb(${Math.round(c[0])},${Math.round(c[1])},${Math.round(c[2])})` });
    }
    return out;
  }
  const RAMPS = { confidence: buildRamp(CIVIDIS, 0.3), commit: buildRamp(VIRIDIS, 0.3) };
  // "correct vs ground truth": index 0 wrong (Okabe-Ito orange), 50 unknown (grey), 100 right (sky blue)
  RAMPS.correct = RAMPS.confidence.map((_, i) => (i < 25 ? { bg: "#f3c677", fg: "#111", solid: "#e69f00" }
    : i > 75 ? { bg: "#b9dcf2", fg: "#111", solid: "#56b4e9" } : { bg: "#e3e5e8", fg: "#111", solid: "#b0b4ba" }));
  const PANE_COLOURS = ["#0072b2", "#d55e00", "#009e73", "#cc79a7"]; // Okabe-Ito

  // slot states
  const UNREACHED = 0, MASKED = 1, GHOST = 2, NOW = 3, DONE = 4, HIDDEN = 5;
  const STATE_NAMES = ["not yet reached", "masked", "ghost guess", "committed this step", "committed earlier", "hidden"];
  const STATE_CLASS = ["st-unreached", "st-masked", "st-ghost", "st-now", "st-done", "st-hidden"];

  // ---- small DOM helpers ---------------------------------------------------------------------
  const SVGNS = "http://www.w3.org/2000/svg";
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function sv(tag, attrs, parent) {
    const e = document.createElementNS(SVGNS, tag);
    if (attrs) for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }
  // A straightened scan (trace page.skew; mudiff_viz/inputs/scan.py): the straight page (pw x ph)
  // was the upload (W x H) turned by -angle about its centre, so a point of the page lands on the
  // upload turned by +angle (counter-clockwise on screen: an SVG rotate(-angle)), centre on centre.
  function skewMap(angle, pw, ph, W, H) {
    const a = angle * Math.PI / 180, c = Math.cos(a), s = Math.sin(a);
    return {
      svg: `translate(${W / 2} ${H / 2}) rotate(${-angle}) translate(${-pw / 2} ${-ph / 2})`,
      point: (x, y) => {
        const dx = x - pw / 2, dy = y - ph / 2;
        return [W / 2 + dx * c + dy * s, H / 2 - dx * s + dy * c];
      },
    };
  }
  const ICONS = {
    "to-start": "M1 3h2v10H1z M9 3v10L3 8z M15 3v10L9 8z",
    "step-back": "M2 3h2v10H2z M13 3v10L6 8z",
    "step-fwd": "M3 3v10l7-5z M12 3h2v10h-2z",
    "to-end": "M1 3v10l6-5z M7 3v10l6-5z M13 3h2v10h-2z",
    play: "M4 2.5v11l9-5.5z",
    pause: "M3.5 3h3v10h-3z M9.5 3h3v10h-3z",
  };
  function icon(name) {
    const s = sv("svg", { viewBox: "0 0 16 16", width: 14, height: 14, class: "mp-icon", "aria-hidden": "true" });
    sv("path", { d: ICONS[name], fill: "currentColor" }, s);
    return s;
  }
  const MASK_GLYPH = "\u2591"; // light shade: one monospace cell per masked position
  const FILLER_GLYPH = "\u2219";  // bullet operator: one per discarded position
  const SPECIAL = /^<\|?[A-Za-z_][^<>]{0,18}\|?>$/;
  const EOS_MARK = "EOS"; // the one symbol for every pair's end-of-text token (the legend explains it)
  const END_NAMES = /^(eos|endoftext|end_of_text|im_end|\/s|eot|eot_id)$/i;
  function shortSpecial(text) {
    // "<eos>", "<|endoftext|>", "<|im_end|>" -> "EOS" (one symbol for the end of text, whatever the
    // tokenizer calls it); other specials compact: "<|box_start|>" -> "BOX_ST", visibly not page text
    const name = text.replace(/^<\|?|\|?>$/g, "");
    return END_NAMES.test(name) ? EOS_MARK : name.toUpperCase().slice(0, 6);
  }
  function fmtS(x) { return x == null || isNaN(x) ? "–" : x < 10 ? x.toFixed(2) + " s" : x.toFixed(1) + " s"; }
  function pct(p) { return p < 0.001 ? "<0.1%" : (100 * p).toFixed(p < 0.1 ? 1 : 0) + "%"; }
  function visible(text) {
    // show whitespace and control characters so a token is never invisible
    if (text === "") return "∅";
    return text.replace(/ /g, "␣").replace(/\n/g, "↵").replace(/\t/g, "⇥");
  }

  // ---- one trace: indexes and per-frame state ------------------------------------------------
  class TraceModel {
    constructor(p) {
      this.p = p;
      const s = p.slots, e = p.entries;
      this.n = s.region.length;
      this.N = p.clock.n;
      this.time = p.clock.time;
      this.prefill = p.clock.prefill_s || 0;
      this.wall = Math.max(p.clock.wall_s || 0, this.time.length ? this.time[this.time.length - 1] : 0, this.prefill);
      this.commit = Int32Array.from(s.commit);
      this.open = Int32Array.from(s.open);
      this.close = Int32Array.from(s.close);
      this.filler = Uint8Array.from(s.filler);
      this.stop = Uint8Array.from(s.stop);
      this.ids = Int32Array.from(s.id);
      this.conf = Float32Array.from(s.conf, (v) => v / 10000);
      this.eslot = Int32Array.from(e.slot);
      this.ecand = Int32Array.from(e.cand);
      this.econf = Float32Array.from(e.conf, (v) => v / 10000);
      this.ecommit = Uint8Array.from(e.commit);
      this.etopId = Int32Array.from(e.topk_id);
      this.etopP = Float32Array.from(e.topk_p, (v) => v / 1000);
      this.tickStart = Int32Array.from(e.tick_start);
      this.maskIds = new Set(p.mask_ids || []);
      // entries per slot (CSR) for ghost histories; the entry's tick from tickStart
      const counts = new Int32Array(this.n + 1);
      for (let i = 0; i < this.eslot.length; i++) counts[this.eslot[i] + 1]++;
      for (let i = 0; i < this.n; i++) counts[i + 1] += counts[i];
      this.slotEntryStart = counts;
      const fill = counts.slice(0, this.n);
      this.slotEntries = new Int32Array(this.eslot.length);
      for (let i = 0; i < this.eslot.length; i++) this.slotEntries[fill[this.eslot[i]]++] = i;
      this.entryTick = new Int32Array(this.eslot.length);
      for (let k = 0; k < this.N; k++) for (let i = this.tickStart[k]; i < this.tickStart[k + 1]; i++) this.entryTick[i] = k;
      // per-frame output buffers
      this.state = new Uint8Array(this.n);
      this.entryAt = new Int32Array(this.n);
      const ser = p.series;
      this.cumKept = new Int32Array(this.N + 1);
      const kept = ser.kept.slice();
      (s.pending || []).forEach((v, i) => { if (v && this.commit[i] >= 0 && this.commit[i] < this.N) kept[this.commit[i]]++; });
      for (let k = 0; k < this.N; k++) this.cumKept[k + 1] = this.cumKept[k] + kept[k];
      this.nKept = 0;
      for (let i = 0; i < this.n; i++) if (!this.filler[i]) this.nKept++;
      // block-wise decoders (diffusion or any registered one) carry a block length; AR does not
      this.blockwise = p.block_length != null;
      this.region = Int32Array.from(s.region);
      this.pos = Int32Array.from(s.pos);
      this.occluded = Uint8Array.from(s.occluded || []);
      this.nOccludedBoxes = (p.page && p.page.occluded ? p.page.occluded.length : 0);
      this.hasOcclusion = this.nOccludedBoxes > 0 || this.occluded.some((v) => v);
      this.order = this.blockwise && p.recorded ? this.decodingOrder() : null;
      // cells drawn masked (or as a guess) at each frame, as compute() draws them: slot i from frame
      // open[i] through frame commit[i] (a filler no later than its block's last frame)
      // a filler is drawn while its block is open: through frame close[i] (its block's last forward
      // is close[i]; frame close[i] + 1 shows the block closed, the filler dropped, as the decoder
      // drops it). In a streamed snapshot the last recorded forward may not end the block: kept.
      this.partial = !!p.partial;
      this.fillerEnd = new Int32Array(this.n).fill(this.N + 1);
      for (let i = 0; i < this.n; i++) {
        if (!this.filler[i] || this.close[i] < 0) continue;
        this.fillerEnd[i] = this.partial && this.close[i] >= this.N - 1 ? this.N + 1 : this.close[i];
      }
      const diff = new Int32Array(this.N + 2);
      for (let i = 0; i < this.n; i++) {
        const a = Math.max(0, this.open[i]);
        let b = this.commit[i] >= 0 ? this.commit[i] + 1 : this.N + 1;
        if (this.filler[i]) b = Math.min(b, this.fillerEnd[i] + 1);
        if (a < Math.min(b, this.N + 1)) { diff[a]++; diff[Math.min(b, this.N + 1)]--; }
      }
      this.maskedAt = new Int32Array(this.N + 1);
      for (let s = 0, acc = 0; s <= this.N; s++) { acc += diff[s]; this.maskedAt[s] = acc; }
    }
    decodingOrder() {
      // per committed token (fillers excluded): its position in its block and the denoising step of
      // its block at which it was committed (commit - open + 1: a block's slots all open at its first
      // forward); sorted by commit forward, so "committed up to frame s" is a prefix
      const L = this.p.block_length || 1, n = this.n;
      const blockEnd = new Map();
      const bkey = (i) => this.region[i] * 1048576 + Math.floor(this.pos[i] / L);
      for (let i = 0; i < n; i++) {
        if (this.commit[i] < 0) continue;
        const k = bkey(i);
        const v = blockEnd.get(k);
        if (v === undefined || this.commit[i] > v) blockEnd.set(k, this.commit[i]);
      }
      const idx = [];
      for (let i = 0; i < n; i++) if (!this.filler[i] && this.commit[i] >= 0) idx.push(i);
      idx.sort((a, b) => this.commit[a] - this.commit[b] || a - b);
      const m = idx.length;
      const slot = Int32Array.from(idx), x = new Int32Array(m), y = new Int32Array(m), at = new Int32Array(m);
      const first = new Int32Array(m + 1), occ = new Int32Array(m + 1), occLast = new Int32Array(m + 1);
      let ymax = 1;
      for (let j = 0; j < m; j++) {
        const i = idx[j];
        x[j] = this.pos[i] % L;
        y[j] = this.commit[i] - this.open[i] + 1;
        at[j] = this.commit[i];
        ymax = Math.max(ymax, y[j]);
        const steps = blockEnd.get(bkey(i)) - this.open[i] + 1;
        first[j + 1] = first[j] + (y[j] === 1 ? 1 : 0);
        occ[j + 1] = occ[j] + (this.occluded[i] ? 1 : 0);
        occLast[j + 1] = occLast[j] + (this.occluded[i] && y[j] === steps ? 1 : 0);
      }
      return { slot, x, y, at, first, occ, occLast, ymax, L, n: m };
    }
    committedBefore(f) {
      // tokens (of the decoding-order chart) committed by forwards < f: a prefix of the sorted order
      const at = this.order.at;
      let lo = 0, hi = at.length;
      while (lo < hi) { const mid = (lo + hi) >> 1; if (at[mid] < f) lo = mid + 1; else hi = mid; }
      return lo;
    }
    slotKey(i) { return this.region[i] + ":" + this.pos[i]; }
    slotOfKey(key) {
      // the slot of (region, position) in this model: slot indexes shift when a snapshot grows
      for (let i = 0; i < this.n; i++) if (this.region[i] + ":" + this.pos[i] === key) return i;
      return -1;
    }
    tokenText(id) {
      if (id < 0) return "";
      const v = this.p.vocab[String(id)];
      return v === undefined ? "<" + id + ">" : v;
    }
    frameAtTime(t) {
      // forwards finished by time t (binary search on the monotone clock)
      if (t < this.prefill) return 0;
      let lo = 0, hi = this.N;
      while (lo < hi) { const mid = (lo + hi) >> 1; if (this.time[mid] <= t) lo = mid + 1; else hi = mid; }
      return lo;
    }
    timeOfFrame(s) { return s <= 0 ? this.prefill : this.time[Math.min(s, this.N) - 1]; }
    compute(s, keepFiller) {
      // keepFiller: draw the discarded positions after their block closed too (the player's toggle)
      s = Math.max(0, Math.min(s, this.N));
      const st = this.state, ea = this.entryAt, c = this.commit, o = this.open;
      const last = s - 1;
      for (let i = 0; i < this.n; i++) {
        ea[i] = -1;
        const ci = c[i];
        if (this.filler[i] && s > this.fillerEnd[i] && (!keepFiller || ci < 0)) st[i] = HIDDEN;
        else if (ci >= 0 && ci < last) st[i] = DONE;
        else if (ci >= 0 && ci === last) st[i] = NOW;
        else if (o[i] <= s) st[i] = MASKED;
        else st[i] = UNREACHED;
      }
      if (last >= 0) {
        for (let e = this.tickStart[last]; e < this.tickStart[last + 1]; e++) {
          const i = this.eslot[e];
          ea[i] = e;
          if (!this.ecommit[e] && st[i] === MASKED && !this.maskIds.has(this.ecand[e])) st[i] = GHOST;
        }
      }
      return s;
    }
    history(i) {
      // the slot's guesses over forwards: [{tick, cand, conf, committed}]
      const out = [];
      for (let j = this.slotEntryStart[i]; j < this.slotEntryStart[i + 1]; j++) {
        const e = this.slotEntries[j];
        out.push({ tick: this.entryTick[e], cand: this.ecand[e], conf: this.econf[e], committed: !!this.ecommit[e], e });
      }
      out.sort((a, b) => a.tick - b.tick);
      return out;
    }
    topk(e) {
      const out = [];
      for (let j = 0; j < 5; j++) {
        const id = this.etopId[5 * e + j];
        if (id >= 0) out.push({ id, p: this.etopP[5 * e + j] });
      }
      return out;
    }
  }

  // ---- one pane: header, text, page overlay --------------------------------------------------
  class Pane {
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
      title.appendChild(el("span", "", p.label || p.decoder));
      head.appendChild(title);
      this.header = el("div", "mp-header");
      this.header.setAttribute("aria-live", "off");
      head.appendChild(this.header);
      this.caption = el("div", "mp-caption");
      head.appendChild(this.caption);
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
      this.buildText();
      this.buildPage();
      this.lastKey = new Float64Array(model.n).fill(-1);
      this.lastRect = new Float64Array(model.n).fill(-1);
      this.lastRegion = new Int8Array(p.regions.length).fill(-1);
    }
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
    buildPage() {
      const p = this.m.p, m = this.m;
      // a straightened scan: the boxes are on the straight page (pw x ph), the image is the upload
      // (W x H) the page was turned back from; one transform draws them onto the upload
      const sk = p.page.skew, pw = p.page.w || 1000, ph = p.page.h || 1400;
      const W = sk ? sk.w : pw, H = sk ? sk.h : ph;
      this.toUpload = sk ? skewMap(sk.angle, pw, ph, W, H) : null;
      const svg = sv("svg", { viewBox: `0 0 ${W} ${H}`, class: "mp-svg", preserveAspectRatio: "xMidYMin meet" });
      svg.setAttribute("role", "img");
      svg.setAttribute("aria-label", "page with token boxes");
      const stack = el("div", "mp-stack");
      if (p.page.image) {
        // the page raster is an <img> in its own layer under the SVG: recolouring boxes never re-rasters it.
        // A streamed snapshot of the same decode reuses the decoded image: no blank frame while it re-decodes
        const cache = this.player._imgCache;
        let img = cache && cache.get(p.page.image);
        if (img) cache.delete(p.page.image);
        else {
          img = el("img", "mp-page-img");
          img.alt = "page";
          img.decoding = "async";
          img.src = p.page.image;
        }
        stack.appendChild(img);
      } else {
        sv("rect", { x: 0, y: 0, width: W, height: H, fill: "#fff", stroke: "#bbb" }, svg);
      }
      const onPage = sk ? sv("g", { class: "mp-straightened", transform: this.toUpload.svg }, svg) : svg;
      const regionLayer = sv("g", { class: "mp-regions" }, onPage);
      this.regionRects = p.regions.map((r, ri) => {
        const b = r.bbox;
        const rect = sv("rect", { x: b[0], y: b[1], width: Math.max(1, b[2] - b[0]), height: Math.max(1, b[3] - b[1]), class: "mp-region" }, regionLayer);
        rect.dataset.region = String(ri);
        return rect;
      });
      const occ = (p.page && p.page.occluded) || [];
      if (occ.length) {
        // words blanked on the page by the occlusion probe: dashed outlines over the (blank) paper
        const occLayer = sv("g", { class: "mp-occluded" }, svg);
        occLayer.setAttribute("pointer-events", "none");
        occ.forEach((b) => {
          const r = sv("rect", { x: b[0], y: b[1], width: Math.max(1, b[2] - b[0]), height: Math.max(1, b[3] - b[1]), class: "mp-occ" }, occLayer);
          sv("title", {}, r).textContent = "word blanked on the page (occlusion probe)";
        });
      }
      const boxLayer = sv("g", { class: "mp-boxes" }, onPage);
      this.rects = new Array(m.n);
      this.hasBoxes = false;
      const boxes = p.slots.box;
      for (let i = 0; i < m.n; i++) {
        const b = boxes[i];
        if (!b) continue;
        this.hasBoxes = true;
        const rect = sv("rect", { x: b[0], y: b[1], width: Math.max(1, b[2] - b[0]), height: Math.max(1, b[3] - b[1]), class: "mp-box st-unreached" }, boxLayer);
        rect.dataset.i = String(i);
        this.rects[i] = rect;
      }
      if (!p.page.image) {
        // no page image (a trace loaded on its own): write the ground truth, or the decoded text, in the region boxes
        const textLayer = sv("g", { class: "mp-ghostpage" }, onPage);
        textLayer.setAttribute("pointer-events", "none");
        p.regions.forEach((r) => {
          const b = r.bbox, h = Math.max(4, b[3] - b[1]);
          const t = sv("text", { x: b[0], y: b[1] + h * 0.8, "font-size": h * 0.7, textLength: Math.max(1, b[2] - b[0]), lengthAdjust: "spacingAndGlyphs" }, textLayer);
          t.textContent = r.gt != null ? r.gt : r.text;
        });
        boxLayer.parentNode.appendChild(boxLayer); // boxes on top
      }
      // the scale at which page text reads on a phone: its median token (else line) box ~20 px tall
      const hs = [];
      for (let i = 0; i < m.n && hs.length < 400; i++) if (boxes[i]) hs.push(boxes[i][3] - boxes[i][1]);
      if (!hs.length) p.regions.forEach((r) => hs.push(r.bbox[3] - r.bbox[1]));
      hs.sort((a, b) => a - b);
      const hMed = hs.length ? Math.max(4, hs[hs.length >> 1]) : 30;
      this.readScale = Math.min(1, 20 / hMed);
      this.svg = svg;
      this.stack = stack;
      this.img = stack.querySelector("img");
      this.pageSize = [W, H];
      stack.appendChild(svg);
      this.pageBox.appendChild(stack);
      this.setView(this.player.opts.pageView);
      const note = el("div", "mp-page-note");
      const src = p.page.source ? String(p.page.source) : "page";
      note.textContent = (p.page.image ? src : src + " (page image not available: showing its text)") +
        (this.hasBoxes ? "" : " · no token boxes in this trace: region boxes only");
      this.pageBox.appendChild(note);
    }
    textExtent() {
      // the union of the region boxes with a margin: short pages do not waste the panel on blank paper
      const [W, H] = this.pageSize, rs = this.m.p.regions;
      if (!rs.length) return [0, 0, W, H];
      let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
      const map = this.toUpload ? this.toUpload.point : (x, y) => [x, y];
      rs.forEach((r) => {
        const b = r.bbox;
        [[b[0], b[1]], [b[2], b[1]], [b[0], b[3]], [b[2], b[3]]].forEach(([px, py]) => {
          const [x, y] = map(px, py);
          x0 = Math.min(x0, x); y0 = Math.min(y0, y); x1 = Math.max(x1, x); y1 = Math.max(y1, y);
        });
      });
      const pad = 0.03 * Math.max(W, H);
      x0 = Math.max(0, x0 - pad); y0 = Math.max(0, y0 - pad); x1 = Math.min(W, x1 + pad); y1 = Math.min(H, y1 + pad);
      if (x1 - x0 < 0.2 * W) { x0 = 0; x1 = W; }
      return [x0, y0, x1 - x0, y1 - y0];
    }
    setView(view) {
      const [W, H] = this.pageSize;
      const [x, y, w, h] = view === "page" ? [0, 0, W, H] : this.textExtent();
      this.svg.setAttribute("viewBox", `${x} ${y} ${w} ${h}`);
      this.stack.style.aspectRatio = `${w} / ${h}`;
      // narrow screens: never narrower than this (the page box scrolls instead), so its text stays readable
      this.stack.style.setProperty("--mp-readable-w", Math.round(w * this.readScale) + "px");
      if (this.img) {
        const st = this.img.style;
        st.width = (100 * W / w) + "%";
        st.height = (100 * H / h) + "%";
        st.left = (-100 * x / w) + "%";
        st.top = (-100 * y / h) + "%";
      }
    }
    render(s, opts) {
      const m = this.m, p = m.p;
      s = m.compute(s, !!opts.keepFiller);
      this.frame = s;
      const st = m.state, ea = m.entryAt;
      const colourBy = opts.colourBy, ramp = RAMPS[colourBy] || RAMPS.confidence;
      const correct = p.slots.correct;
      const N = Math.max(1, m.N - 1), under = opts.underline, ghosts = opts.ghosts;
      const occl = m.occluded;
      // the header counts what is drawn: cells shown masked (or as a guess) and cells committed now
      let nMasked = 0, nNow = 0;
      for (let i = 0; i < m.n; i++) {
        let state = st[i];
        const e = ea[i];
        if (state === MASKED || state === GHOST) nMasked++;
        else if (state === NOW) nNow++;
        let cand = -1, conf = 0;
        if (state === GHOST) {
          if (ghosts) { cand = m.ecand[e]; conf = m.econf[e]; } else state = MASKED;
        } else if (state === NOW || state === DONE) {
          conf = m.conf[i];
        }
        let ci = 0;
        if (state === NOW || state === DONE) {
          ci = colourBy === "commit" ? Math.round(100 * m.commit[i] / N)
            : colourBy === "correct" ? (correct && correct[i] >= 0 ? 100 * correct[i] : 50) : Math.round(100 * conf);
        }
        else if (state === GHOST) ci = Math.round(100 * conf);
        const low = (state === NOW || state === DONE) && conf < under ? 1 : 0;
        const key = state + 8 * (ci + 128 * (low + 2 * (cand + 1)));
        if (key !== this.lastKey[i]) {
          this.lastKey[i] = key;
          const sp = this.spans[i];
          let raw = null;
          if (state === NOW || state === DONE) raw = m.stop[i] || m.filler[i] ? m.tokenText(m.ids[i]) : p.slots.text[i];
          else if (state === GHOST) raw = m.tokenText(cand);
          let cls = (m.filler[i] ? "filler " : "token ") + STATE_CLASS[state];
          if (low) cls += " low";
          if (m.stop[i] || (raw !== null && SPECIAL.test(raw))) cls += " special";
          if (occl[i]) cls += " occ";
          if (this.selected === i) cls += " sel";
          sp.className = cls;
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
          } else if (state === GHOST) {
            sp.style.background = "";
            sp.style.color = this.player.ghostColours[ci];
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
            r.setAttribute("class", rc);
            if (state === NOW || state === DONE) r.setAttribute("fill", ramp[ci].solid);
            else if (state === GHOST) { r.setAttribute("fill", RAMPS.confidence[ci].solid); r.setAttribute("fill-opacity", String(0.1 + 0.35 * conf)); }
            else r.removeAttribute("fill");
            if (state !== GHOST) r.removeAttribute("fill-opacity");
          }
        }
      }
      // region boxes: active (decoding at this forward) / done / waiting
      const active = this.activeRegions(s);
      p.regions.forEach((r, ri) => {
        const first = r.start, lastSlot = r.start + r.n - 1;
        let state = 0;
        if (active.has(ri)) state = 2;
        else if (r.n > 0 && m.commit[lastSlot] >= 0 && m.commit[lastSlot] < s) state = 3;
        else if (r.n > 0 && m.open[first] <= s) state = 1;
        if (state !== this.lastRegion[ri]) {
          this.lastRegion[ri] = state;
          this.regionRects[ri].setAttribute("class", "mp-region rs-" + state);
          this.lineEls[ri].classList.toggle("active", state === 2);
        }
      });
      this.renderHeader(s, active.size, nMasked, nNow);
      // a focused token that scrubbing hid (not reached yet): keep the focus in the text box
      const fi = this.focusI;
      if (fi >= 0 && (st[fi] === UNREACHED || st[fi] === HIDDEN) && document.activeElement === this.spans[fi]) {
        this.spans[fi].setAttribute("tabindex", "-1");
        this.focusI = -1;
        this.textBox.setAttribute("tabindex", "0");
        this.textBox.focus({ preventScroll: true });
      }
    }
    activeRegions(s) {
      const m = this.m, set = new Set();
      if (s >= 1 && s <= m.N) for (let e = m.tickStart[s - 1]; e < m.tickStart[s]; e++) set.add(m.p.slots.region[m.eslot[e]]);
      return set;
    }
    renderHeader(s, nActive, nMasked, nNow) {
      const m = this.m, p = m.p, ser = p.series, k = s - 1;
      const parts = [];
      const done = m.cumKept[Math.min(s, m.N)];
      // a streamed snapshot: the totals (blocks, the open block's steps, tokens) are not known yet
      const live = m.partial, of = (n) => (live ? "/?" : "/" + n);
      if (!p.recorded) {
        parts.push(`forward ${s}${of(m.N)}`, live ? `${done} tokens committed so far` : `${done}/${m.nKept} tokens committed`);
        this.setHeader(parts, "This trace was recorded without per-step data: only commit times are known.");
        return;
      }
      if (m.blockwise) {
        const B = p.n_blocks || 1;
        // the last recorded block of a snapshot may still be open: its step count is not final
        const lastBlock = m.N ? ser.block[m.N - 1] : 0;
        const stepsOf = (kk) => (live && ser.block[kk] === lastBlock ? "?" : ser.steps[kk]);
        if (s === 0) parts.push(`block 1${of(B)}`, `step 0/${live ? "?" : ser.steps[0] || 0}`);
        else parts.push(`block ${(ser.block[k] == null ? 0 : ser.block[k]) + 1}${of(B)}`, `step ${ser.step[k]}/${stepsOf(k)}`);
        parts.push(`masks left ${nMasked}`, `committed this step ${nNow}`);
      } else {
        parts.push(`token step ${s}${of(m.N)}`, `lines decoding ${s === 0 ? p.regions.length : nActive}`, `committed this step ${nNow}`);
      }
      if (live) parts.push("decoding, totals not known yet");
      this.setHeader(parts, this.explain(s, nNow));
    }
    setHeader(parts, caption) {
      const text = parts.join(" · ");
      if (text !== this._headerText) { this.header.textContent = text; this._headerText = text; }
      if (caption !== this._caption) { this.caption.textContent = caption; this._caption = caption; }
    }
    explain(s, nNow) {
      const m = this.m, p = m.p, ser = p.series, k = s - 1;
      if (s === 0) {
        return m.blockwise
          ? `Start: the page is encoded (prefill ${fmtS(m.prefill)}); each line's first block of ${p.block_length} positions is all masks.`
          : `Start: the page is encoded (prefill ${fmtS(m.prefill)}); each line will be read one token per forward pass.`;
      }
      const lines = ser.regions[k];
      const nLines = lines === 1 ? "1 line" : `${lines} lines`;
      if (!m.blockwise) return `Forward ${s}: every line still decoding (${lines}) appends exactly one token.`;
      const th = p.threshold;
      const strategy = (p.params.strategy || "").replace(/_/g, " ");
      const forced = ser.forced[k] ? ` ${ser.forced[k]} forced at the step limit.` : "";
      const positions = (n) => (n === 1 ? "1 position" : `${n} positions`);
      if (th != null && ser.above) {
        const above = ser.above[k];
        if (nNow === 0) return `Forward ${s}: nothing was committed at this step (${above === 0 ? "no guess" : above === 1 ? "1 guess" : `${above} guesses`} above the ${th} threshold).${forced}`;
        if (above > 0 && above >= nNow) {
          return `Forward ${s}: ${above === 1 ? "the 1 guess" : `all ${above} guesses`} above the ${th} threshold ${above === 1 ? "was" : "were"} committed, over ${nLines}.${forced}`;
        }
        const most = nNow === 1 ? "the most confident guess" : `the ${nNow} most confident`;
        if (lines === 1) {
          return above === 0
            ? `Forward ${s}: no guess passed the ${th} threshold, so the quota committed ${most}.${forced}`
            : `Forward ${s}: only ${above === 1 ? "1 guess" : `${above} guesses`} passed the ${th} threshold, so the quota committed ${most}.${forced}`;
        }
        return above === 0
          ? `Forward ${s}: no guess passed the ${th} threshold, so each line committed its most confident guesses instead (the quota): ${positions(nNow)} over ${nLines}.${forced}`
          : `Forward ${s}: ${above === 1 ? "1 guess" : `${above} guesses`} passed the ${th} threshold; lines where too few passed committed their most confident guesses instead (the quota): ${positions(nNow)} over ${nLines}.${forced}`;
      }
      return `Forward ${s}: ${strategy || "policy"} committed ${positions(nNow)} over ${nLines}.${forced}`;
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

  function scrollWithin(box, target) {
    // scroll the box (not the window) so that the target is inside it, with a small margin
    const b = box.getBoundingClientRect(), r = target.getBoundingClientRect(), pad = 12;
    if (!b.height || !r.height) return;
    if (r.top < b.top + pad) box.scrollTop -= b.top + pad - r.top;
    else if (r.bottom > b.bottom - pad) box.scrollTop += Math.min(r.bottom - b.bottom + pad, r.top - b.top - pad);
    if (r.left < b.left + pad) box.scrollLeft -= b.left + pad - r.left;
    else if (r.right > b.right - pad) box.scrollLeft += Math.min(r.right - b.right + pad, r.left - b.left - pad);
  }

  function displayToken(text) {
    // keep layout: a newline token shows as a visible mark; specials compact; other text as is
    if (SPECIAL.test(text)) return shortSpecial(text);
    return text.replace(/\n/g, "↵\n");
  }

  // ---- charts tied to the scrubber ----------------------------------------------------------
  // The SVGs stretch to their box (viewBox 300 x 110, no aspect ratio): every label is HTML next to
  // them, so its size is the CSS size (>= 11 px) on any screen, never scaled with the chart.
  const CHARTS = [
    { key: "masks_left", title: "Masks left in open blocks", y: (ser, k, m) => m.maskedAt[k + 1], kind: "area" },
    { key: "committed", title: "Tokens committed per forward", y: (ser, k) => ser.committed[k], kind: "bar" },
    { key: "conf", title: "Guess confidence: min and mean vs threshold", y: (ser, k) => ser.conf_mean[k], y2: (ser, k) => ser.conf_min[k], kind: "conf", max: 1 },
    { key: "progress", title: "Text committed so far", kind: "progress", max: 1 },
  ];
  const LINES_CHART = { key: "lines", title: "Lines still decoding (AR has no masks)", y: (ser, k) => ser.regions[k], kind: "area" };
  const ORDER_CHART = { key: "order", title: "Decoding order: step within its block vs position in the block", kind: "order" };
  const PADL = 3, PADR = 3;

  class Charts {
    constructor(player) {
      this.player = player;
      this.root = el("div", "mp-charts");
      const allAr = player.models.every((m) => !m.blockwise);
      const defs = CHARTS.map((c) => (c.key === "masks_left" && allAr ? LINES_CHART : c));
      if (player.models.some((m) => m.order)) defs.push(ORDER_CHART);
      this.charts = defs.map((c) => {
        const box = el("figure", "mp-chart");
        box.dataset.chart = c.key;
        box.appendChild(el("figcaption", "", c.title));
        const plot = el("div", "mp-plot");
        const yax = el("div", "mp-yax");
        const yTop = el("span", "mp-lab"), yBot = el("span", "mp-lab");
        yax.appendChild(yTop); yax.appendChild(yBot);
        const area = el("div", "mp-area");
        const svg = sv("svg", { viewBox: "0 0 300 110", preserveAspectRatio: "none", class: "mp-chart-svg" });
        svg.setAttribute("aria-hidden", "true");
        area.appendChild(svg);
        const xax = el("div", "mp-xax");
        const xL = el("span", "mp-lab"), xR = el("span", "mp-lab");
        xax.appendChild(xL); xax.appendChild(xR);
        plot.appendChild(yax); plot.appendChild(area); plot.appendChild(xax);
        box.appendChild(plot);
        const key = c.kind === "order" ? el("div", "mp-chart-key") : null;
        if (key) box.appendChild(key);
        const read = el("div", "mp-chart-read");
        box.appendChild(read);
        this.root.appendChild(box);
        if (c.kind !== "order") {
          svg.addEventListener("click", (ev) => {
            const r = svg.getBoundingClientRect();
            const fx = (ev.clientX - r.left) / r.width;
            this.player.seekFraction((fx * 300 - PADL) / (300 - PADL - PADR));
          });
        }
        return { c, svg, read, area, key, labels: { yTop, yBot, xL, xR } };
      });
    }
    build() {
      const pl = this.player;
      const xOf = pl.xOf.bind(pl);
      this.charts.forEach((ch) => {
        const svg = ch.svg;
        while (svg.firstChild) svg.removeChild(svg.firstChild);
        ch.area.querySelectorAll(".mp-lab-th").forEach((e) => e.remove());
        ch._t = null;
        if (ch.c.kind === "order") { this.buildOrder(ch); return; }
        let ymax = ch.c.max || 1;
        if (!ch.c.max) pl.models.forEach((m) => { for (let k = 0; k < m.N; k++) ymax = Math.max(ymax, ch.c.y(m.p.series, k, m) || 0); });
        const Y = (v) => 100 - (v / ymax) * 88;
        sv("line", { x1: PADL, x2: 300 - PADR, y1: 100, y2: 100, class: "mp-axis" }, svg);
        const live = pl.models.some((m) => m.partial);
        // while decoding, the text's length is unknown: the progress chart counts tokens instead of a share
        const kept = Math.max(1, ...pl.models.map((m) => m.nKept));
        ch.labels.yTop.textContent = ch.c.max ? (ch.c.key === "progress" ? (live ? kept + " tokens" : "100%") : "1") : String(ymax);
        ch.labels.yBot.textContent = "0";
        ch.labels.xL.textContent = pl.clock === "wall" ? "0 s" : "0";
        ch.labels.xR.textContent = (pl.clock === "wall" ? fmtS(pl.maxTime()) : "forward " + pl.maxFrame()) + (live ? " so far" : "");
        const thresholds = new Set();
        pl.models.forEach((m, mi) => {
          const colour = pl.models.length > 1 ? pl.colourOf(mi) : null;
          const ser = m.p.series;
          const cls = "mp-series s" + mi;
          if (ch.c.kind === "progress") {
            let d = `M${xOf(m, 0).toFixed(1)},${Y(0).toFixed(1)}`;
            const den = live ? kept : Math.max(1, m.nKept);
            for (let s = 1; s <= m.N; s++) d += `L${xOf(m, s).toFixed(1)},${Y(m.cumKept[s] / den).toFixed(1)}`;
            const path = sv("path", { d, class: cls + " line" }, svg);
            if (colour) path.style.stroke = colour;
            if (m.p.dash) path.style.strokeDasharray = "4 2";
            return;
          }
          if (!m.p.recorded) return;
          if (ch.c.kind === "bar" || ch.c.kind === "area") {
            let d = `M${xOf(m, 0).toFixed(1)},100`;
            for (let k = 0; k < m.N; k++) {
              const v = ch.c.y(ser, k, m) || 0, x0 = xOf(m, k), x1 = xOf(m, k + 1);
              d += `L${x0.toFixed(1)},${Y(v).toFixed(1)}L${x1.toFixed(1)},${Y(v).toFixed(1)}`;
            }
            d += `L${xOf(m, m.N).toFixed(1)},100Z`;
            const path = sv("path", { d, class: cls + " fill" }, svg);
            if (colour) { path.style.fill = colour; path.style.stroke = colour; }
            if (m.p.dash) { path.style.strokeDasharray = "4 2"; path.style.fillOpacity = "0.12"; }
          } else if (ch.c.kind === "conf") {
            [ch.c.y, ch.c.y2].forEach((f, j) => {
              let d = "";
              for (let k = 0; k < m.N; k++) {
                const v = f(ser, k);
                if (v == null) continue;
                const x = (xOf(m, k) + xOf(m, k + 1)) / 2;
                d += (d ? "L" : "M") + x.toFixed(1) + "," + Y(v).toFixed(1);
              }
              if (!d) return;
              const path = sv("path", { d, class: cls + " line" + (j ? " minline" : "") }, svg);
              if (colour) path.style.stroke = colour;
              if (m.p.dash && !j) path.style.strokeDasharray = "6 3";
            });
            if (m.p.threshold != null && !thresholds.has(m.p.threshold)) {
              thresholds.add(m.p.threshold);
              const ty = Y(m.p.threshold);
              sv("line", { x1: PADL, x2: 300 - PADR, y1: ty, y2: ty, class: "mp-threshold" }, svg);
              const t = el("span", "mp-lab mp-lab-th", "threshold " + m.p.threshold);
              t.style.top = (100 * ty / 110).toFixed(1) + "%";
              ch.area.appendChild(t);
            }
          }
        });
        ch.cursor = sv("line", { x1: PADL, x2: PADL, y1: 4, y2: 104, class: "mp-cursor" }, svg);
      });
    }
    buildOrder(ch) {
      // one mark per committed token of each block-wise pane, all drawn once; a frame only shows or
      // hides the marks whose commit forward it crossed (no per-frame rebuild)
      const pl = this.player, svg = ch.svg;
      const ms = pl.models.filter((m) => m.order);
      const L = Math.max(...ms.map((m) => m.order.L));
      const ymax = Math.max(2, ...ms.map((m) => m.order.ymax));
      const w = 300 - PADL - PADR, cw = w / L, rh = 100 / ymax;
      ch.labels.yTop.textContent = "step " + ymax;
      ch.labels.yBot.textContent = "step 1";
      ch.labels.xL.textContent = "position 0";
      ch.labels.xR.textContent = "position " + (L - 1);
      sv("line", { x1: PADL, x2: 300 - PADR, y1: 105, y2: 105, class: "mp-axis" }, svg);
      const dw = Math.max(1.2, Math.min(cw * 0.72, 9)), dh = Math.max(1.2, Math.min(rh * 0.72, 9));
      ch.orders = pl.models.map((m, mi) => {
        if (!m.order) return null;
        const o = m.order;
        const g = sv("g", { class: "mp-dots" }, svg);
        g.style.color = pl.colourOf(mi);
        const dots = new Array(o.n), base = new Array(o.n);
        for (let j = 0; j < o.n; j++) {
          const cx = PADL + (o.x[j] + 0.5) * cw, cy = 104 - (o.y[j] - 0.5) * rh;
          base[j] = "mp-dot" + (m.occluded[o.slot[j]] ? " occ" : "");
          dots[j] = sv("rect", { x: (cx - dw / 2).toFixed(2), y: (cy - dh / 2).toFixed(2), width: dw.toFixed(2), height: dh.toFixed(2), class: base[j] + " off" }, g);
        }
        return { m, dots, base, lo: 0, hi: 0 }; // dots [0, hi) shown, [lo, hi) committed at this frame
      });
      const key = ch.key;
      while (key.firstChild) key.removeChild(key.firstChild);
      const item = (cls, text) => {
        const k = el("span", "mp-key-item");
        const sw = sv("svg", { viewBox: "0 0 10 10", width: 10, height: 10, class: "mp-key-svg" });
        sv("rect", { x: 1, y: 1, width: 8, height: 8, class: cls }, sw);
        if (cls.indexOf("occ") < 0 && cls.indexOf("now") < 0) sw.style.color = pl.colourOf(pl.models.indexOf(ms[0]));
        k.appendChild(sw);
        k.appendChild(el("span", "", text));
        key.appendChild(k);
      };
      item("mp-dot", "token");
      item("mp-dot now", "committed this step");
      if (ms.some((m) => m.hasOcclusion)) item("mp-dot occ", "blanked word (occlusion probe)");
    }
    updateOrder(ch) {
      const pl = this.player;
      const parts = [];
      ch.orders.forEach((od) => {
        if (!od) return;
        const m = od.m, o = m.order, s = pl.frameOf(m);
        const hi = m.committedBefore(s), lo = s >= 1 ? m.committedBefore(s - 1) : hi;
        const a = Math.min(od.lo, lo), b = Math.max(od.hi, hi);
        for (let j = a; j < b; j++) {
          const cls = j >= hi ? od.base[j] + " off" : j >= lo ? od.base[j] + " now" : od.base[j];
          od.dots[j].setAttribute("class", cls);
        }
        od.lo = lo; od.hi = hi;
        const who = pl.models.length > 1 ? pl.shortName(m) + ": " : "";
        if (!hi) { parts.push(who + "no token committed yet"); return; }
        let t = `${who}${pct(o.first[hi] / hi)} committed at their block's first step so far (${o.first[hi]}/${hi})`;
        if (m.hasOcclusion) {
          const n = o.occ[hi];
          t += n ? ` · blanked words: ${o.occLast[hi]}/${n} tokens at their block's last step (${pct(o.occLast[hi] / n)})`
            : " · blanked words: none of their tokens committed so far";
        }
        parts.push(t);
      });
      const t = parts.join(" · ");
      if (t !== ch._t) { ch.read.textContent = t; ch._t = t; }
    }
    update() {
      const pl = this.player, x = pl.cursorX();
      this.charts.forEach((ch) => {
        if (ch.c.kind === "order") { this.updateOrder(ch); return; }
        if (ch.cursor) { ch.cursor.setAttribute("x1", x.toFixed(1)); ch.cursor.setAttribute("x2", x.toFixed(1)); }
        const parts = pl.models.map((m, mi) => {
          const s = pl.frameOf(m), k = s - 1, ser = m.p.series;
          const who = pl.models.length > 1 ? pl.shortName(m) + ": " : "";
          if (ch.c.kind === "progress") return who + (m.partial ? `${m.cumKept[s]} tokens so far (the total is not known yet)`
            : Math.round(100 * m.cumKept[s] / Math.max(1, m.nKept)) + "%");
          if (!m.p.recorded) return who + "–";
          if (k < 0 || k >= m.N) return who + "–";
          if (ch.c.kind === "conf") {
            const a = ser.conf_mean[k], b = ser.conf_min[k];
            return who + (a == null ? "–" : `mean ${a.toFixed(2)}, min ${b.toFixed(2)}`);
          }
          return who + String(ch.c.y(ser, k, m));
        });
        const t = parts.join(" · ");
        if (t !== ch._t) { ch.read.textContent = t; ch._t = t; }
      });
    }
  }

  // ---- the player: controls, panes, charts, tooltip -------------------------------------------
  function listOf(payload) { return payload.mode === "compare" ? payload.panes : [payload]; }
  function streamKey(payload) {
    // the id of a streamed decode (every snapshot of one decode carries it); null: not streamed
    const ids = listOf(payload).map((p) => (p && p.stream != null ? String(p.stream) : null));
    if (!ids.some((v) => v !== null)) return null;
    return (payload.mode === "compare" ? "compare\u0001" : "") + ids.join("\u0001");
  }
  const HINT = "Hover a token or a box for its alternatives; click or tap to pin it here. Keyboard: Tab to the text, arrow keys move between tokens, Enter pins, Esc unpins.";
  const NAV_KEYS = new Set(["ArrowLeft", "ArrowRight", "ArrowUp", "ArrowDown", "Home", "End"]);
  const PHONE_WIDTH = "(max-width: 640px)"; // options and legend fold away (player.css has the same width)
  const NARROW = "(max-width: 900px)"; // one column: panes stack, the pinned card docks under its pane

  class Player {
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
      this.buildControls();
      this.buildLegend();
      const grid = payload.layout === "grid" && list.length > 2;
      this.panesBox = el("div", this.compare ? "mp-panes mp-compare" + (grid ? " mp-grid" : "") : "mp-panes");
      this.panes = this.models.map((m, i) => new Pane(this, m, i, this.compare));
      this.panes.forEach((p) => this.panesBox.appendChild(p.root));
      root.appendChild(this.panesBox);
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
      // one opening frame for one trace and for a comparison: the finished result (Play restarts from 0)
      this.seekFrame(this.maxFrame());
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
      // the pane's own colour if it names one; else diffusion blue, AR vermilion (as in the plotly
      // figures), unless two panes share a decoder
      if (this.models[i].p.colour) return this.models[i].p.colour;
      const ds = this.models.map((m) => m.p.decoder);
      if (new Set(ds).size === ds.length) return ds[i] === "ar" ? "#d55e00" : "#0072b2";
      return PANE_COLOURS[i % PANE_COLOURS.length];
    }
    shortName(m) { return m.p.short || (m.p.decoder === "ar" ? "AR" : m.p.decoder); }
    // ----- clock helpers
    maxFrame() { return Math.max(...this.models.map((m) => m.N)); }
    maxTime() { return Math.max(...this.models.map((m) => m.wall)); }
    frameOf(m) { return this.clock === "wall" ? m.frameAtTime(this.t) : Math.min(this.s, m.N); }
    xOf(m, s) {
      // x position (chart units) of frame s of model m on the current clock
      const w = 300 - PADL - PADR;
      if (this.clock === "wall") return PADL + w * m.timeOfFrame(s) / Math.max(1e-9, this.maxTime());
      return PADL + w * s / Math.max(1, this.maxFrame());
    }
    cursorX() {
      const w = 300 - PADL - PADR;
      if (this.clock === "wall") return PADL + w * this.t / Math.max(1e-9, this.maxTime());
      return PADL + w * this.s / Math.max(1, this.maxFrame());
    }
    // ----- controls
    buildControls() {
      const bar = el("div", "mp-controls");
      const btn = (cls, text, label, fn) => {
        const b = el("button", "mp-btn " + cls);
        b.appendChild(icon(cls === "play" ? "play" : cls));
        if (text) b.appendChild(el("span", "mp-btn-text", text));
        b.type = "button";
        b.setAttribute("aria-label", label);
        b.title = label;
        b.addEventListener("click", fn);
        bar.appendChild(b);
        return b;
      };
      btn("to-start", "", "Back to the start (Home)", () => { this.pause(); this.seekFrame(0); });
      btn("step-back", "", "One step back (←)", () => { this.pause(); this.stepBy(-1); });
      this.playBtn = btn("play", "Play", "Play / pause (space)", () => this.toggle());
      btn("step-fwd", "", "One step forward (→)", () => { this.pause(); this.stepBy(1); });
      btn("to-end", "", "Jump to the end (End)", () => { this.pause(); this.seekFrame(this.maxFrame()); });
      const scrub = el("input", "mp-scrub");
      scrub.type = "range";
      scrub.min = "0";
      scrub.setAttribute("aria-label", "scrub through the decode");
      scrub.addEventListener("input", () => {
        this.pause();
        if (this.clock === "wall") this.seekTime(Number(scrub.value) / 1000);
        else this.seekFrame(Number(scrub.value));
      });
      this.scrub = scrub;
      bar.appendChild(scrub);
      this.clockLabel = el("span", "mp-clock");
      bar.appendChild(this.clockLabel);
      this.liveBadge = el("span", "mp-live", "decoding… (live)");
      this.liveBadge.setAttribute("role", "status");
      this.liveBadge.title = "the decode is still running: new steps are added as they arrive";
      this.liveBadge.hidden = true;
      bar.appendChild(this.liveBadge);
      const row2 = el("div", "mp-controls mp-controls-2");
      const field = (label, input) => {
        const l = el("label", "mp-field");
        l.appendChild(el("span", "", label));
        l.appendChild(input);
        row2.appendChild(l);
        return input;
      };
      const select = (cls, options, value, fn) => {
        const s = el("select", cls);
        options.forEach(([v, t]) => { const o = el("option", "", t); o.value = v; s.appendChild(o); });
        s.value = value;
        s.addEventListener("change", () => fn(s.value));
        return s;
      };
      this.clockSel = field("Clock", select("mp-clocksel", [["forward", "forward passes"], ["wall", "wall time"]], "forward", (v) => this.setClock(v)));
      this.speedSel = field("Speed", select("mp-speed", [], "", (v) => this.setSpeed(Number(v))));
      this.colourSel = field("Colour by", select("mp-colour", [], "", (v) => { this.opts.colourBy = v; this.buildLegend(); this.redraw(true); }));
      this.updateColourModes();
      field("Page", select("mp-pageview", [["text", "fit the text"], ["page", "whole page"]], this.opts.pageView, (v) => { this.opts.pageView = v; this.panes.forEach((p) => p.setView(v)); }));
      const ghosts = el("input", "mp-ghosts");
      ghosts.type = "checkbox";
      ghosts.checked = !!this.opts.ghosts; // the option outlives a result: the box shows it
      ghosts.addEventListener("change", () => { this.opts.ghosts = ghosts.checked; this.redraw(true); });
      field("Show guesses", ghosts);
      const fillers = el("input", "mp-fillers");
      fillers.type = "checkbox";
      fillers.checked = !!this.opts.keepFiller;
      fillers.title = "positions the model filled after the end-of-text token are dropped when their block closes; tick to keep them drawn";
      fillers.addEventListener("change", () => { this.opts.keepFiller = fillers.checked; this.redraw(true); });
      field("Keep discarded", fillers);
      const under = el("input", "mp-under");
      under.type = "number";
      under.min = "0"; under.max = "1"; under.step = "0.05";
      under.value = String(this.opts.underline);
      under.addEventListener("change", () => { const v = Number(under.value); if (v >= 0 && v <= 1) { this.opts.underline = v; this.buildLegend(); this.redraw(true); } });
      field("Underline below", under);
      // the options and the legend: one disclosure, folded on phones so the text sits close to Play
      this.more = el("details", "mp-more");
      const summary = el("summary", "", "Options and legend");
      this.more.appendChild(summary);
      this.more.appendChild(row2);
      this.more.open = !(typeof window.matchMedia === "function" && window.matchMedia(PHONE_WIDTH).matches);
      this.root.appendChild(bar);
      this.root.appendChild(this.more);
    }
    updateColourModes() {
      const modes = [["confidence", "confidence"], ["commit", "commit step"]];
      if (this.models.some((m) => (m.p.slots.correct || []).some((c) => c >= 0))) modes.push(["correct", "right vs ground truth"]);
      if (!modes.some(([v]) => v === this.opts.colourBy)) this.opts.colourBy = "confidence";
      const sel = this.colourSel;
      const have = Array.from(sel.options).map((o) => o.value).join();
      if (have !== modes.map(([v]) => v).join()) {
        while (sel.firstChild) sel.removeChild(sel.firstChild);
        modes.forEach(([v, t]) => { const o = el("option", "", t); o.value = v; sel.appendChild(o); });
      }
      if (sel.value !== this.opts.colourBy) sel.value = this.opts.colourBy;
    }
    buildLegend() {
      if (!this.legend) { this.legend = el("div", "mp-legend"); (this.more || this.root).appendChild(this.legend); }
      const lg = this.legend;
      while (lg.firstChild) lg.removeChild(lg.firstChild);
      const states = [["st-unreached", "not yet reached", ""], ["st-masked", "masked", MASK_GLYPH], ["st-ghost", "ghost guess (faded by confidence)", "g"],
        ["st-now", "committed this step", "a"], ["st-done", "committed earlier", "a"], ["st-done low", "low confidence (< " + this.opts.underline + ")", "a"],
        ["st-done special", "end of text (the model's stop token, whatever its tokenizer calls it)", EOS_MARK],
        ["filler st-done", "filled after the end of text: shown while its block is open, then dropped (Keep discarded shows them)", FILLER_GLYPH]];
      if (this.models.some((m) => m.hasOcclusion)) states.push(["st-done occ", "word blanked on the page (occlusion probe): dashed outline on the page, dashed underline in the text", "ab"]);
      const stBox = el("div", "mp-legend-states");
      states.forEach(([cls, label, sample]) => {
        const item = el("span", "mp-legend-item");
        item.dataset.legend = cls;
        const sw = el("span", "mp-swatch " + cls, sample || "·");
        if (/^(st-now|st-done|token st-done)/.test(cls)) { sw.style.background = RAMPS.confidence[90].bg; sw.style.color = RAMPS.confidence[90].fg; }
        if (cls === "st-done low") { sw.style.background = RAMPS.confidence[30].bg; sw.style.color = RAMPS.confidence[30].fg; }
        if (cls === "st-ghost") sw.style.color = "color-mix(in srgb, var(--mp-fg) 55%, transparent)";
        item.appendChild(sw);
        item.appendChild(el("span", "", label));
        stBox.appendChild(item);
      });
      lg.appendChild(stBox);
      if (this.opts.colourBy === "correct") {
        const box = el("div", "mp-legend-ramp");
        [["correct", RAMPS.correct[100]], ["differs from the ground truth", RAMPS.correct[0]], ["no ground truth", RAMPS.correct[50]]].forEach(([label, c]) => {
          const sw = el("span", "mp-swatch", "a");
          sw.style.background = c.bg;
          sw.style.color = c.fg;
          box.appendChild(sw);
          box.appendChild(el("span", "", label));
        });
        lg.appendChild(box);
        return;
      }
      const rampBox = el("div", "mp-legend-ramp");
      const commitMode = this.opts.colourBy === "commit";
      const ramp = RAMPS[commitMode ? "commit" : "confidence"];
      rampBox.appendChild(el("span", "", commitMode ? "commit step: first" : "confidence 0"));
      const bar = el("span", "mp-ramp");
      bar.style.background = "linear-gradient(to right," + [0, 25, 50, 75, 100].map((i) => ramp[i].bg).join(",") + ")";
      const th = this.models.length && this.models.find((m) => m.p.threshold != null);
      if (th && !commitMode) {
        const mark = el("span", "mp-ramp-mark");
        mark.style.left = (100 * th.p.threshold) + "%";
        mark.title = "threshold " + th.p.threshold;
        bar.appendChild(mark);
      }
      rampBox.appendChild(bar);
      rampBox.appendChild(el("span", "", commitMode ? "last" : "1" + (th ? " (| = threshold " + th.p.threshold + ")" : "")));
      lg.appendChild(rampBox);
    }
    setClock(v) {
      const wasTime = this.currentTime();
      this.clock = v;
      if (this.clockSel && this.clockSel.value !== v) this.clockSel.value = v;
      const sel = this.speedSel;
      while (sel.firstChild) sel.removeChild(sel.firstChild);
      const opts = v === "wall" ? [[0.1, "0.1× real time"], [0.25, "0.25×"], [0.5, "0.5×"], [1, "1× (real time)"], [2, "2×"], [5, "5×"]]
        : [[1, "1 forward/s"], [2, "2 /s"], [4, "4 /s"], [8, "8 /s"], [16, "16 /s"], [32, "32 /s"], [64, "64 /s"]];
      opts.forEach(([val, t]) => { const o = el("option", "", t); o.value = String(val); sel.appendChild(o); });
      sel.value = String(v === "wall" ? this.speedWall : this.speedForward);
      if (v === "wall") this.t = wasTime;
      else this.s = this.models.length ? this.models[0].frameAtTime(wasTime) : 0; // keep the frame of the first pane
      this.applyClock();
      this.redraw(false);
    }
    applyClock() {
      // the scrubber's range and the charts' x axis follow the clock (and the models: a snapshot grows)
      this.scrub.max = String(this.clock === "wall" ? Math.round(1000 * this.maxTime()) : this.maxFrame());
      this.scrub.step = "1";
      this.charts.build();
      this.buildStrip();
    }
    currentTime() {
      if (!this.models || !this.models.length) return 0;
      if (this.clock === "wall") return this.t;
      return this.models[0].timeOfFrame(this.s);
    }
    setSpeed(v) { if (this.clock === "wall") this.speedWall = v; else this.speedForward = v; }
    buildStrip() {
      // wall-time map per pane: prefill (hatched), then one tick per forward; cursor at the current time
      const st = this.strip;
      while (st.firstChild) st.removeChild(st.firstChild);
      const T = Math.max(1e-9, this.maxTime());
      this.stripCursors = [];
      this.models.forEach((m, mi) => {
        const row = el("div", "mp-strip-row");
        const label = el("span", "mp-strip-label", this.compare ? this.shortName(m) : "wall time");
        label.title = (this.compare ? this.shortName(m) + ": " : "") + "wall time";
        row.appendChild(label);
        const svg = sv("svg", { viewBox: "0 0 1000 14", preserveAspectRatio: "none", class: "mp-strip-svg" });
        const pw = 1000 * m.prefill / T;
        sv("rect", { x: 0, y: 1, width: Math.max(0.5, pw), height: 12, class: "mp-prefill" }, svg);
        sv("rect", { x: pw, y: 1, width: Math.max(0, 1000 * m.wall / T - pw), height: 12, class: "mp-decode" }, svg);
        let d = "";
        const step = Math.max(1, Math.ceil(m.N / 400));
        for (let k = 0; k < m.N; k += step) { const x = 1000 * m.time[k] / T; d += `M${x.toFixed(1)},2V12`; }
        if (d) sv("path", { d, class: "mp-ticks" }, svg);
        const cur = sv("line", { x1: 0, x2: 0, y1: 0, y2: 14, class: "mp-strip-cursor" }, svg);
        this.stripCursors.push(cur);
        svg.addEventListener("click", (ev) => {
          const r = svg.getBoundingClientRect();
          this.pause();
          const t = T * (ev.clientX - r.left) / r.width;
          if (this.clock === "wall") this.seekTime(t); else this.seekFrame(m.frameAtTime(t));
        });
        row.appendChild(svg);
        const info = el("span", "mp-strip-info", `prefill ${fmtS(m.prefill)} + decode ${fmtS(m.wall - m.prefill)}`);
        row.appendChild(info);
        st.appendChild(row);
      });
    }
    // ----- seeking and playback
    seekFraction(f) {
      f = Math.max(0, Math.min(1, f));
      this.pause();
      if (this.clock === "wall") this.seekTime(f * this.maxTime());
      else this.seekFrame(Math.round(f * this.maxFrame()));
    }
    seekFrame(s) {
      this.s = Math.max(0, Math.min(this.maxFrame(), Math.round(s)));
      if (this.clock === "wall") this.t = this.models[0].timeOfFrame(this.s);
      this.redraw(false);
    }
    seekTime(t) {
      this.t = Math.max(0, Math.min(this.maxTime(), t));
      this.redraw(false);
    }
    stepBy(d) {
      if (this.clock === "wall") {
        // step to the next/previous forward boundary of the first pane that moves
        const m = this.models[0];
        const f = m.frameAtTime(this.t);
        const target = Math.max(0, Math.min(m.N, f + d));
        this.seekTime(m.timeOfFrame(target) + (d > 0 ? 1e-6 : 0));
      } else this.seekFrame(this.s + d);
    }
    atEnd() { return this.clock === "wall" ? this.t >= this.maxTime() - 1e-9 : this.s >= this.maxFrame(); }
    toggle() { if (this.playing) this.pause(); else this.play(); }
    play() {
      if (!this.models.length) return;
      if (this.atEnd()) { if (this.clock === "wall") this.t = 0; else this.s = 0; }
      this.startLoop();
    }
    startLoop() {
      this.playing = true;
      this.setPlayButton(true);
      let last = performance.now(), acc = 0;
      const tick = (now) => {
        if (!this.playing) return;
        const dt = Math.min(0.25, (now - last) / 1000);
        last = now;
        if (this.clock === "wall") {
          this.t = Math.min(this.maxTime(), this.t + dt * this.speedWall);
          this.redraw(false);
        } else {
          acc += dt * this.speedForward;
          if (acc >= 1) { const n = Math.floor(acc); acc -= n; this.s = Math.min(this.maxFrame(), this.s + n); this.redraw(false); }
        }
        if (this.atEnd()) { this.pause(); return; }
        this._raf = requestAnimationFrame(tick);
      };
      this._raf = requestAnimationFrame(tick);
    }
    pause() {
      this.playing = false;
      if (this._raf) cancelAnimationFrame(this._raf);
      this._raf = null;
      if (this.playBtn) this.setPlayButton(false);
    }
    setPlayButton(playing) {
      const b = this.playBtn;
      while (b.firstChild) b.removeChild(b.firstChild);
      b.appendChild(icon(playing ? "pause" : "play"));
      b.appendChild(el("span", "mp-btn-text", playing ? "Pause" : "Play"));
      b.classList.toggle("playing", playing);
    }
    redraw(force) {
      if (!this.models || !this.models.length) return;
      if (force) this.panes.forEach((p) => p.lastKey.fill(-1));
      this.panes.forEach((p, i) => p.render(this.frameOf(this.models[i]), this.opts));
      const v = this.clock === "wall" ? Math.round(this.t * 1000) : this.s;
      if (Number(this.scrub.value) !== v) this.scrub.value = String(v);
      this.scrub.style.setProperty("--pos", (100 * v / Math.max(1, Number(this.scrub.max))) + "%");
      const m0 = this.models[0];
      const t = this.clock === "wall" ? this.t : m0.timeOfFrame(this.s);
      const f = this.frameOf(m0);
      let label;
      if (this.clock === "wall") {
        label = t < m0.prefill ? `t = ${fmtS(t)} · prefill (vision encoder + prompt)` : `t = ${fmtS(t)} · forward ${f}/${m0.N}`;
      } else {
        label = `forward ${this.s}/${this.maxFrame()} · t = ${fmtS(t)}`;
      }
      if (label !== this._label) { this.clockLabel.textContent = label; this._label = label; }
      this.charts.update();
      const T = Math.max(1e-9, this.maxTime());
      this.stripCursors.forEach((c, i) => {
        const x = (1000 * (this.clock === "wall" ? this.t : this.models[i].timeOfFrame(this.frameOf(this.models[i]))) / T).toFixed(1);
        c.setAttribute("x1", x); c.setAttribute("x2", x);
      });
      if (this.pinned) this.showDetails(this.inspect, this.pinned.pane, this.pinned.i, true);
      if (this.hover && !this.tip.hidden) this.showDetails(this.tip, this.hover.pane, this.hover.i, false);
    }
    // ----- hover / click / keyboard details
    bindHover() {
      this.panes.forEach((pane, pi) => {
        const find = (ev) => {
          const t = ev.target.closest ? ev.target.closest("[data-i]") : null;
          return t && pane.root.contains(t) ? Number(t.dataset.i) : -1;
        };
        const over = (ev) => {
          if (this.pointer === "touch") return; // a tap pins the card; no floating tooltip over the text
          const i = find(ev);
          if (i < 0) return;
          this.hover = { pane: pi, i };
          this.showDetails(this.tip, pi, i, false);
          this.tip.hidden = false;
          this.placeTip(ev);
        };
        const out = (ev) => {
          const to = ev.relatedTarget;
          if (to && to.closest && to.closest("[data-i]")) return;
          this.tip.hidden = true;
          this.hover = null;
        };
        const click = (ev, scroll) => {
          const i = find(ev);
          if (i < 0) return;
          this.pin(pi, i, scroll);
        };
        [pane.textBox, pane.svg].forEach((box) => {
          box.addEventListener("mouseover", over);
          box.addEventListener("mousemove", (ev) => { if (!this.tip.hidden) this.placeTip(ev); });
          box.addEventListener("mouseout", out);
        });
        pane.textBox.addEventListener("click", (ev) => click(ev, "page"));
        pane.svg.addEventListener("click", (ev) => click(ev, "text"));
        // keyboard: the text box is one tab stop; arrows rove over the tokens (see Pane.navigate)
        pane.textBox.addEventListener("keydown", (ev) => this.onTextKey(ev, pane, pi));
        pane.textBox.addEventListener("focusin", (ev) => {
          const t = ev.target;
          if (t !== pane.textBox && t.dataset && t.dataset.i != null && pane.focusI !== Number(t.dataset.i)) pane.focusToken(Number(t.dataset.i), true);
        });
        pane.textBox.addEventListener("focusout", (ev) => {
          if (!ev.relatedTarget || !pane.textBox.contains(ev.relatedTarget)) pane.leaveTokens();
        });
      });
    }
    onTextKey(ev, pane, pi) {
      if (ev.altKey || ev.ctrlKey || ev.metaKey) return;
      const t = ev.target, k = ev.key;
      const i = t !== pane.textBox && t.dataset && t.dataset.i != null ? Number(t.dataset.i) : -1;
      if (NAV_KEYS.has(k)) {
        ev.preventDefault();
        ev.stopPropagation(); // not a frame step: the focus is in the text
        const j = pane.navigate(k, i);
        if (j >= 0) pane.focusToken(j);
      } else if (i >= 0 && (k === "Enter" || k === " ")) {
        ev.preventDefault();
        ev.stopPropagation();
        this.pin(pi, i, "page");
      } else if (k === "Escape") {
        ev.preventDefault();
        ev.stopPropagation();
        this.unpin();
        pane.leaveTokens();
        pane.textBox.focus({ preventScroll: true });
      }
    }
    narrow() { return !!(this.media && this.media.matches); }
    pin(pi, i, scroll) {
      const pane = this.panes[pi];
      this.pinned = { pane: pi, i };
      this.panes.forEach((p, j) => { if (j !== pi) p.select(null, null); });
      pane.select(i, scroll);
      const narrow = this.narrow();
      if (narrow || this.pointer === "touch") { this.tip.hidden = true; this.hover = null; }
      this.placeInspect(pi);
      this.showDetails(this.inspect, pi, i, true);
      this.inspect.classList.add("pinned");
      if (narrow && scroll) {
        // show the card (docked under the text it belongs to) without scrolling its token away
        const r = this.inspect.getBoundingClientRect(), tok = pane.spans[i].getBoundingClientRect();
        const by = Math.min(r.bottom - window.innerHeight + 8, tok.top - 8);
        if (by > 0) window.scrollBy(0, by);
      }
    }
    placeInspect(pi) {
      // wide: one card under the panes; narrow (panes stacked): under the pane of the pinned token
      const box = this.inspect;
      if (!box) return;
      if (pi != null && this.narrow()) { if (box.parentNode !== this.panes[pi].root) this.panes[pi].root.appendChild(box); }
      else if (this.panesBox && this.panesBox.nextSibling !== box) this.panesBox.after(box);
    }
    placeTip(ev) {
      const r = this.root.getBoundingClientRect();
      const tw = this.tip.offsetWidth || 280, th = this.tip.offsetHeight || 200;
      let x = ev.clientX - r.left + 14, y = ev.clientY - r.top + 14;
      if (x + tw > r.width) x = Math.max(0, ev.clientX - r.left - tw - 14);
      if (ev.clientY + th + 14 > window.innerHeight) y = Math.max(0, ev.clientY - r.top - th - 14);
      this.tip.style.left = x + "px";
      this.tip.style.top = y + "px";
    }
    showDetails(box, pi, i, pinned) {
      const pane = this.panes[pi], m = pane.m, p = m.p;
      const s = pane.frame, state = m.state[i], e = m.entryAt[i];
      while (box.firstChild) box.removeChild(box.firstChild);
      const head = el("div", "mp-d-head");
      const finalText = m.filler[i] ? m.tokenText(m.ids[i]) : (m.stop[i] ? m.tokenText(m.ids[i]) : p.slots.text[i]);
      const q = el("span", "mp-d-token", visible(finalText));
      head.appendChild(q);
      head.appendChild(el("span", "mp-d-where", `${p.regions.length > 1 ? "line " + (p.slots.region[i] + 1) + ", " : ""}position ${p.slots.pos[i] + 1}` +
        (m.filler[i] ? " · after the end-of-text token (discarded)" : m.stop[i] ? " · end of text" : "")));
      box.appendChild(head);
      const c = m.commit[i];
      const corr = p.slots.correct ? p.slots.correct[i] : -1;
      if (corr >= 0) head.appendChild(el("span", corr ? "mp-d-ok" : "mp-d-bad", corr ? "✓ matches the ground truth" : "✗ differs from the ground truth"));
      if (pinned) {
        const x = el("button", "mp-d-close", "×");
        x.type = "button";
        x.setAttribute("aria-label", "close this card (unpin, Esc)");
        x.title = "close (Esc)";
        x.addEventListener("click", () => { this.unpin(); pane.textBox.focus({ preventScroll: true }); });
        head.appendChild(x);
      }
      const status = el("div", "mp-d-status");
      status.appendChild(el("strong", "", STATE_NAMES[state === GHOST && !this.opts.ghosts ? MASKED : state]));
      if (c >= 0) status.appendChild(el("span", "", ` · committed at forward ${c + 1} (t = ${fmtS(m.time[c])}) with confidence ${pct(m.filler[i] ? (e >= 0 ? m.econf[e] : 0) : m.conf[i])}`));
      else status.appendChild(el("span", "", " · never committed (decode stopped)"));
      box.appendChild(status);
      if (m.occluded[i]) box.appendChild(el("div", "mp-d-occ", "This word was blanked on the page (occlusion probe): the model had only the context to go on."));
      // top-5 at the current step, else at commit
      let te = e, label = `Top-5 at forward ${s} (this step)`;
      const hist = m.history(i);
      if (te < 0) {
        const atCommit = hist.find((h) => h.committed);
        if (atCommit) { te = atCommit.e; label = `Top-5 at its commit (forward ${atCommit.tick + 1})`; }
      }
      if (te >= 0) {
        box.appendChild(el("div", "mp-d-label", label));
        const list = el("ol", "mp-topk");
        const chosen = m.ecand[te];
        m.topk(te).forEach(({ id, p: prob }) => {
          const li = el("li", id === chosen ? "chosen" : "");
          li.appendChild(el("span", "mp-topk-tok", visible(m.tokenText(id))));
          const barBox = el("span", "mp-topk-bar");
          const bar = el("span", "mp-topk-fill");
          bar.style.width = (100 * prob).toFixed(1) + "%";
          barBox.appendChild(bar);
          li.appendChild(barBox);
          li.appendChild(el("span", "mp-topk-p", pct(prob)));
          list.appendChild(li);
        });
        box.appendChild(list);
      } else if (!p.recorded) {
        box.appendChild(el("div", "mp-d-label", "No per-step data in this trace (recorded with --no-record)."));
      } else {
        box.appendChild(el("div", "mp-d-label", "Not reached yet: no guesses so far."));
      }
      // ghost history
      if (hist.length > 1) {
        let flips = 0;
        for (let j = 1; j < hist.length; j++) if (hist[j].cand !== hist[j - 1].cand) flips++;
        box.appendChild(el("div", "mp-d-label", `Guess history: ${hist.length} forwards, the guess changed ${flips} time${flips === 1 ? "" : "s"} before commit`));
        const h = el("div", "mp-hist");
        const shown = hist.length > 24 ? hist.slice(0, 8).concat([null]).concat(hist.slice(-15)) : hist;
        shown.forEach((g) => {
          if (!g) { h.appendChild(el("span", "mp-hist-gap", "…")); return; }
          const chip = el("span", "mp-hist-chip" + (g.committed ? " committed" : "") + (g.tick === s - 1 ? " current" : ""));
          chip.appendChild(el("span", "mp-hist-tok", visible(m.tokenText(g.cand))));
          chip.appendChild(el("span", "mp-hist-p", pct(g.conf)));
          chip.title = `forward ${g.tick + 1}: ${m.tokenText(g.cand)} (${pct(g.conf)})${g.committed ? " committed" : ""}`;
          h.appendChild(chip);
        });
        box.appendChild(h);
      } else if (hist.length === 1 && m.blockwise) {
        box.appendChild(el("div", "mp-d-label", "Committed at the first forward that saw it: no earlier guesses."));
      }
    }
    unpin() {
      this.pinned = null;
      this.panes.forEach((p) => p.select(null, null));
      const box = this.inspect;
      while (box.firstChild) box.removeChild(box.firstChild);
      box.classList.remove("pinned");
      box.appendChild(el("div", "mp-inspect-hint", HINT));
      this.placeInspect(null);
      this.redraw(true);
    }
    onKey(ev) {
      if (!this.models || !this.models.length) return;
      if (ev.altKey || ev.ctrlKey || ev.metaKey) return;
      const tag = ev.target && ev.target.tagName;
      if (tag === "INPUT" && ev.target.type !== "range" || tag === "SELECT" || tag === "TEXTAREA") return;
      if (tag === "BUTTON" && (ev.key === " " || ev.key === "Enter")) return; // the button's own action
      if (ev.key === " ") { ev.preventDefault(); this.toggle(); }
      else if (ev.key === "ArrowRight") { ev.preventDefault(); this.pause(); this.stepBy(1); }
      else if (ev.key === "ArrowLeft") { ev.preventDefault(); this.pause(); this.stepBy(-1); }
      else if (ev.key === "Home") { ev.preventDefault(); this.pause(); this.seekFrame(0); }
      else if (ev.key === "End") { ev.preventDefault(); this.pause(); this.seekFrame(this.maxFrame()); }
      else if (ev.key === "Escape") this.unpin();
    }
    destroy() {
      this.pause();
      this.root.removeEventListener("keydown", this.onKey);
      this.root.removeEventListener("pointerover", this.onPointer, true);
      this.root.removeEventListener("pointerdown", this.onPointer, true);
      if (this.media && this.media.removeEventListener) this.media.removeEventListener("change", this.onMedia);
    }
  }


  function injectCss(css) {
    if (!css || typeof document === "undefined" || document.getElementById("mudiff-player-css")) return;
    const style = document.createElement("style");
    style.id = "mudiff-player-css";
    style.textContent = css;
    document.head.appendChild(style);
  }

  global.MudiffPlayer = {
    mount(root, payload, css) {
      // a second mount on the same element reuses its player: a later snapshot of the decode on
      // screen (same stream id) keeps the user's place; anything else replaces the result
      injectCss(css);
      let player = root.__mudiffPlayer;
      if (!player) {
        player = new Player(root);
        root.__mudiffPlayer = player;
      }
      player.load(payload);
      return player;
    },
    STATE_NAMES,
  };
})(typeof window !== "undefined" ? window : globalThis);
