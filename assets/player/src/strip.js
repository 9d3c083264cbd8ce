/* Player methods: the wall-time strip (prefill, then one tick per forward) under the panes. */
import { el, sv } from "./dom.js";
import { fmtS } from "./format.js";

// Player methods: wall-time strip
export class WallStrip {
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
}
