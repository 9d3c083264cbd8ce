/* Player methods: the legend of the slot states and of the colour ramp. */
import { RAMPS } from "./colours.js";
import { el } from "./dom.js";
import { MASK_GLYPH, EOS_MARK, FILLER_GLYPH } from "./format.js";

// Player methods: legend
export class Legend {
  buildLegend() {
    if (!this.legend) { this.legend = el("div", "mp-legend"); (this.more || this.root).appendChild(this.legend); }
    const lg = this.legend;
    while (lg.firstChild) lg.removeChild(lg.firstChild);
    const states = [["st-unreached", "not yet reached", ""], ["st-masked", "masked", MASK_GLYPH], ["st-ghost", "ghost guess (faded by confidence)", "g"],
      ["st-now", "committed this step", "a"], ["st-done", "committed earlier", "a"], ["st-done low", "low confidence (< " + this.opts.underline + ")", "a"],
      ["st-done special", "end of text (the model's stop token, whatever its tokenizer calls it)", EOS_MARK],
      ["filler st-done", "filled after the end of text: shown while its block is open, then dropped (Keep discarded shows them)", FILLER_GLYPH]];
    if (this.models.some((m) => m.speculative)) {
      // draft and verify: a ghost guess never shows there; the states a draft goes through do
      if (this.models.every((m) => m.speculative)) states.splice(2, 1);
      states.splice(2, 0, ["st-draft", "draft: proposed, not verified yet (faded by confidence)", "d"],
        ["st-now v-accepted", "draft accepted by the verifier", "a"],
        ["st-now v-rejected", "draft rejected (struck through), the verifier's token in its place", "b"],
        ["st-discarded", "draft discarded unverified: it came after a rejected one (or after the end of text)", "c"],
        ["st-now v-bonus", "bonus: the verifier's own token, past the drafts", "e"]);
    }
    if (this.models.some((m) => m.hasOcclusion)) states.push(["st-done occ", "word blanked on the page (occlusion probe): dashed outline on the page, dashed underline in the text", "ab"]);
    const stBox = el("div", "mp-legend-states");
    states.forEach(([cls, label, sample]) => {
      const item = el("span", "mp-legend-item");
      item.dataset.legend = cls;
      const sw = el("span", "mp-swatch " + cls, sample || "·");
      if (/^(st-now|st-done|token st-done)/.test(cls)) { sw.style.background = RAMPS.confidence[90].bg; sw.style.color = RAMPS.confidence[90].fg; }
      if (cls === "st-done low") { sw.style.background = RAMPS.confidence[30].bg; sw.style.color = RAMPS.confidence[30].fg; }
      if (cls === "st-now v-rejected") sw.dataset.draft = "x";
      if (cls === "st-ghost" || cls === "st-draft") sw.style.color = "color-mix(in srgb, var(--mp-fg) 55%, transparent)";
      item.appendChild(sw);
      item.appendChild(el("span", "", label));
      stBox.appendChild(item);
    });
    lg.appendChild(stBox);
    if (this.opts.colourBy === "correct" || this.opts.colourBy === "verdict") {
      const box = el("div", "mp-legend-ramp");
      const keys = this.opts.colourBy === "correct"
        ? [["correct", RAMPS.correct[100]], ["differs from the ground truth", RAMPS.correct[0]], ["no ground truth", RAMPS.correct[50]]]
        : [["an accepted draft", RAMPS.verdict[100]], ["the verifier's token for a rejected draft", RAMPS.verdict[0]], ["the verifier's own (bonus)", RAMPS.verdict[50]]];
      keys.forEach(([label, c]) => {
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
}
