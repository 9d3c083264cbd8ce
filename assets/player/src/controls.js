/* Player methods: the control bar (play, scrub) and the options row. */
import { el, icon } from "./dom.js";

export const PHONE_WIDTH = "(max-width: 640px)"; // options and legend fold away (player.css has the same width)
// Player methods: controls and options
export class Controls {
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
    field(this.models.some((m) => m.speculative) ? "Show guesses and drafts" : "Show guesses", ghosts);
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
    if (this.link) row2.appendChild(this.buildLinkButton()); // a view the app can reopen: its link, at this frame
    // the options and the legend: one disclosure, folded on phones so the text sits close to Play
    this.more = el("details", "mp-more");
    const summary = el("summary", "", "Options and legend");
    this.more.appendChild(summary);
    this.more.appendChild(row2);
    this.more.open = !(typeof window.matchMedia === "function" && window.matchMedia(PHONE_WIDTH).matches);
    this.root.appendChild(bar);
    this.root.appendChild(this.more);
    // phones: the bar sticks to the top; what sticks or scrolls under it is placed below its height
    if (typeof ResizeObserver === "function") {
      const note = () => this.root.style.setProperty("--mp-bar-h", bar.offsetHeight + "px");
      this._barObserver = new ResizeObserver(note);
      this._barObserver.observe(bar);
      note();
    }
  }
  linkToFrame() {
    // the page's own address with the view's link parameters and this frame (the app opens it there)
    const url = new URL(window.location.href);
    ["lesson", "trace", "frame", "tab"].forEach((k) => url.searchParams.delete(k));
    Object.entries(this.link).forEach(([k, v]) => url.searchParams.set(k, String(v)));
    url.searchParams.set("frame", String(this.s));
    url.hash = "";
    return url.toString();
  }
  buildLinkButton() {
    const box = el("span", "mp-link");
    const b = el("button", "mp-btn mp-copy-link", "Copy link to this frame");
    b.type = "button";
    b.title = "a link that opens this view at the frame on screen";
    const shown = el("input", "mp-link-text");
    shown.readOnly = true;
    shown.hidden = true;
    shown.setAttribute("aria-label", "link to this frame");
    b.addEventListener("click", () => {
      const link = this.linkToFrame();
      b.dataset.link = link;
      shown.value = link;
      const done = (ok) => {
        b.textContent = ok ? "Link copied" : "Copy the link:";
        shown.hidden = ok;
        if (!ok) { shown.focus(); shown.select(); }
        setTimeout(() => { b.textContent = "Copy link to this frame"; }, 2500);
      };
      if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(link).then(() => done(true), () => done(false));
      else done(false);
    });
    box.appendChild(b);
    box.appendChild(shown);
    return box;
  }
  updateColourModes() {
    // a trace imported from the release's generate has no confidences: colour by commit step
    const imported = this.models.every((m) => m.p.params && m.p.params.imported_from);
    const modes = imported ? [["commit", "commit step"]] : [["confidence", "confidence"], ["commit", "commit step"]];
    if (this.models.some((m) => (m.p.slots.correct || []).some((c) => c >= 0))) modes.push(["correct", "right vs ground truth"]);
    if (this.models.some((m) => m.speculative)) modes.push(["verdict", "draft verdict"]);
    if (!modes.some(([v]) => v === this.opts.colourBy)) this.opts.colourBy = modes[0][0];
    const sel = this.colourSel;
    const have = Array.from(sel.options).map((o) => o.value).join();
    if (have !== modes.map(([v]) => v).join()) {
      while (sel.firstChild) sel.removeChild(sel.firstChild);
      modes.forEach(([v, t]) => { const o = el("option", "", t); o.value = v; sel.appendChild(o); });
    }
    if (sel.value !== this.opts.colourBy) sel.value = this.opts.colourBy;
  }
}
