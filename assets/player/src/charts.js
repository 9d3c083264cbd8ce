/* Charts tied to the scrubber (SVG, drawn once per clock; a frame moves the cursor and readouts). */
import { el, sv } from "./dom.js";
import { fmtS, pct } from "./format.js";

// ---- charts tied to the scrubber ----------------------------------------------------------
// The SVGs stretch to their box (viewBox 300 x 110, no aspect ratio): every label is HTML next to
// them, so its size is the CSS size (>= 11 px) on any screen, never scaled with the chart.
// Every chart reads the payload's series (core/counts.py), as the pane header does: one source.
const committedRead = (ser, k) => (ser.fillers[k] ? `${ser.committed[k]} (${ser.kept[k]} tokens + ${ser.fillers[k]} after end of text)` : String(ser.committed[k]));
export const CHARTS = [
  { key: "masks_left", title: "Masks left in the blocks each forward denoised", y: (ser, k) => ser.masks_left[k], kind: "area" },
  { key: "committed", title: "Positions committed per forward (tokens + fillers after end of text)", y: (ser, k) => ser.committed[k], kind: "bar", read: committedRead },
  { key: "conf", title: "Guess confidence: min and mean vs threshold", y: (ser, k) => ser.conf_mean[k], y2: (ser, k) => ser.conf_min[k], kind: "conf", max: 1 },
  { key: "progress", title: "Text committed so far", kind: "progress", max: 1 },
];
export const LINES_CHART = { key: "lines", title: "Regions still decoding (AR has no masks)", y: (ser, k) => ser.regions[k], kind: "area" };
// draft and verify: what each forward's verification kept (the readout says of how many)
export const DRAFTS_CHART = { key: "drafts", title: "Drafts accepted per forward", y: (ser, k, m) => (m.speculative ? ser.accepted[k] : 0), kind: "bar",
  read: (ser, k, m) => (m.speculative ? `${ser.accepted[k]} of ${ser.verified[k]} verified` : "–") };
export const ORDER_CHART = { key: "order", title: "Decoding order: step within its block vs position in the block", kind: "order" };
export const PADL = 3, PADR = 3;

export class Charts {
  constructor(player) {
    this.player = player;
    this.root = el("div", "mp-charts");
    const allAr = player.models.every((m) => !m.blockwise);
    const allSpec = player.models.every((m) => m.speculative);
    const defs = CHARTS.map((c) => (c.key === "masks_left" && allSpec ? DRAFTS_CHART : c.key === "masks_left" && allAr ? LINES_CHART
      : c.key === "conf" && allSpec ? { ...c, title: "Confidence of drafts and verifications: min and mean" } : c));
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
      if (c.kind !== "order" && player.models.length > 1) box.appendChild(this.legend());
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
  legend() {
    // one entry per pane: its colour (dashed for a probed page) and its name, so no line is unlabelled
    const pl = this.player, key = el("div", "mp-chart-key mp-chart-legend");
    pl.models.forEach((m, mi) => {
      const k = el("span", "mp-key-item");
      const sw = sv("svg", { viewBox: "0 0 16 6", width: 16, height: 6, class: "mp-key-svg" });
      const line = sv("line", { x1: 0, x2: 16, y1: 3, y2: 3 }, sw);
      line.style.stroke = pl.colourOf(mi);
      line.style.strokeWidth = "3";
      if (m.p.dash) line.style.strokeDasharray = "4 2";
      k.appendChild(sw);
      k.appendChild(el("span", "", pl.shortName(m)));
      key.appendChild(k);
    });
    return key;
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
      const values = []; // each pane's number at this frame, for tests (data-values)
      const parts = pl.models.map((m, mi) => {
        const s = pl.frameOf(m), k = s - 1, ser = m.p.series;
        values.push(m.p.recorded && k >= 0 && k < m.N && ch.c.y && ch.c.kind !== "conf" ? ch.c.y(ser, k, m) : null);
        const who = pl.models.length > 1 ? pl.shortName(m) + ": " : "";
        if (ch.c.kind === "progress") return who + (m.partial ? `${m.cumKept[s]} tokens so far (the total is not known yet)`
          : Math.round(100 * m.cumKept[s] / Math.max(1, m.nKept)) + "%");
        if (!m.p.recorded) return who + "–";
        if (k < 0 || k >= m.N) return who + "–";
        if (ch.c.kind === "conf") {
          const a = ser.conf_mean[k], b = ser.conf_min[k];
          return who + (a == null ? "–" : `mean ${a.toFixed(2)}, min ${b.toFixed(2)}`);
        }
        return who + (ch.c.read ? ch.c.read(ser, k, m) : String(ch.c.y(ser, k, m)));
      });
      const t = parts.join(" · ");
      if (t !== ch._t) { ch.read.textContent = t; ch._t = t; ch.read.dataset.values = JSON.stringify(values); }
    });
  }
}
