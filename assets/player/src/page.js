/* The page image with its region and token boxes (an SVG over the raster), and how much of it shows. */
import { el, sv } from "./dom.js";

// A straightened scan (trace page.skew; mudiff_viz/inputs/scan.py): the straight page (pw x ph)
// was the upload (W x H) turned by -angle about its centre, so a point of the page lands on the
// upload turned by +angle (counter-clockwise on screen: an SVG rotate(-angle)), centre on centre.
export function skewMap(angle, pw, ph, W, H) {
  const a = angle * Math.PI / 180, c = Math.cos(a), s = Math.sin(a);
  return {
    svg: `translate(${W / 2} ${H / 2}) rotate(${-angle}) translate(${-pw / 2} ${-ph / 2})`,
    point: (x, y) => {
      const dx = x - pw / 2, dy = y - ph / 2;
      return [W / 2 + dx * c + dy * s, H / 2 - dx * s + dy * c];
    },
  };
}
// Pane methods: the page overlay
export class PageOverlay {
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
    // draft and verify: a rejected draft's box is struck through on the frame that rejected it
    this.strikeLayer = m.speculative ? sv("g", { class: "mp-strikes" }, onPage) : null;
    if (this.strikeLayer) this.strikeLayer.setAttribute("pointer-events", "none");
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
    if (p.stages) this.drawStages(); // a two-stage parse: the blocks' boxes labelled and linked (stages.js)
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
    const [W, H] = this.pageSize, p = this.m.p;
    // a two-stage parse: the blocks' extent (the layout pass's region is the whole page)
    const blocks = p.stages ? p.regions.filter((r, ri) => ri !== p.stages.layout) : [];
    const rs = blocks.length ? blocks : p.regions;
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
}
