/* Player methods: pointer hover and clicks, and the keyboard (frame keys on the player, token keys in the text). */
export const NAV_KEYS = new Set(["ArrowLeft", "ArrowRight", "ArrowUp", "ArrowDown", "Home", "End"]);
// Player methods: hover, click, keyboard
export class Input {
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
    else if ((ev.key === "[" || ev.key === "]") && this.stageNav) { ev.preventDefault(); this.stepRegion(ev.key === "]" ? 1 : -1); }
  }
}
