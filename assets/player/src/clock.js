/* Player methods: the clock (forward passes or wall time), seeking, playback and the redraw of a frame. */
import { el, icon } from "./dom.js";
import { fmtS } from "./format.js";
import { PADL, PADR } from "./charts.js";

// Player methods: clock, seeking, playback
export class Clock {
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
      if (this.atEnd()) {
        const again = this.loop;
        this.pause();
        if (again) { // a looping showcase: hold the end, then play again (any control stops it: pause())
          this.loop = true;
          this._loopTimer = setTimeout(() => { if (this.loop) { this.seekFrame(0); this.startLoop(); } }, 2500);
        }
        return;
      }
      this._raf = requestAnimationFrame(tick);
    };
    this._raf = requestAnimationFrame(tick);
  }
  pause() {
    this.playing = false;
    this.loop = false;
    if (this._loopTimer) { clearTimeout(this._loopTimer); this._loopTimer = null; }
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
    if (this.stageNav) this.renderRegionNav();
    const T = Math.max(1e-9, this.maxTime());
    this.stripCursors.forEach((c, i) => {
      const x = (1000 * (this.clock === "wall" ? this.t : this.models[i].timeOfFrame(this.frameOf(this.models[i]))) / T).toFixed(1);
      c.setAttribute("x1", x); c.setAttribute("x2", x);
    });
    if (this.pinned) this.showDetails(this.inspect, this.pinned.pane, this.pinned.i, true);
    if (this.hover && !this.tip.hidden) this.showDetails(this.tip, this.hover.pane, this.hover.i, false);
  }
}
