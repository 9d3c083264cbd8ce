/* A pane's header line and the caption that explains the frame in words. */
import { fmtS } from "./format.js";
import { V_DRAFTED, V_ACCEPTED, V_REJECTED, V_DISCARDED, V_BONUS } from "./states.js";

// Pane methods: header and caption
// Every number of the header comes from the payload's series (core/counts.py, one source): the
// charts read the same series, so the header and the charts agree on every frame. The counts are
// also written to the header's data attributes (data-masks-left, data-committed, ...) for tests.
export const COUNT_TIPS = {
  "masks left": "positions still masked after this forward, in the blocks it denoised",
  "committed this step": "positions this forward committed: tokens of the text plus fillers after its end of text",
  "regions decoding": "regions (text lines or layout blocks) this forward decoded",
  "drafts verified": "drafts this forward judged: accepted, rejected or discarded",
};

// Pane methods: header and caption
export class PaneHeader {
  frameCounts(s) {
    // the counts of frame s (the outcome of forward s - 1), or null at frame 0 / without records
    const m = this.m, ser = m.p.series, k = s - 1;
    if (!m.p.recorded || k < 0 || k >= m.N) return null;
    const c = { committed: ser.committed[k], tokens: ser.kept[k], fillers: ser.fillers[k], regions: ser.regions[k] };
    if (m.blockwise && !m.speculative) c.masksLeft = ser.masks_left[k];
    if (m.speculative) {
      c.verified = ser.verified[k]; c.accepted = ser.accepted[k]; c.rejected = ser.rejected[k];
      c.discarded = ser.discarded[k]; c.bonus = ser.bonus[k]; c.drafted = ser.drafted[k];
    }
    return c;
  }
  committedText(c) {
    return c.fillers ? `${c.committed} (${c.tokens} tokens + ${c.fillers} after end of text)` : String(c.committed);
  }
  renderHeader(s) {
    const m = this.m, p = m.p, ser = p.series, k = s - 1;
    const parts = [];
    const done = m.cumKept[Math.min(s, m.N)];
    const c = this.frameCounts(s);
    // a streamed snapshot: the totals (blocks, the open block's steps, tokens) are not known yet
    const live = m.partial, of = (n) => (live ? "/?" : "/" + n);
    if (!p.recorded) {
      parts.push(`forward ${s}${of(m.N)}`, live ? `${done} tokens committed so far` : `${done}/${m.nKept} tokens committed`);
      this.setHeader(parts, "This trace was recorded without per-step data: only commit times are known.", c);
      return;
    }
    if (m.speculative) {
      parts.push(`forward ${s}${of(m.N)}`, `regions decoding ${c ? c.regions : p.regions.length}`);
      if (c) parts.push(`drafts verified ${c.verified}`, `committed this step ${this.committedText(c)}`);
      else parts.push("nothing committed yet");
      if (live) parts.push("decoding, totals not known yet");
      this.setHeader(parts, this.explainDrafts(s, c), c);
      return;
    }
    if (m.blockwise) {
      const B = p.n_blocks || 1;
      // the last recorded block of a snapshot may still be open: its step count is not final
      const lastBlock = m.N ? ser.block[m.N - 1] : 0;
      const stepsOf = (kk) => (live && ser.block[kk] === lastBlock ? "?" : ser.steps[kk]);
      if (s === 0) parts.push(`block 1${of(B)}`, `step 0/${live ? "?" : ser.steps[0] || 0}`, "nothing committed yet");
      else {
        parts.push(`block ${(ser.block[k] == null ? 0 : ser.block[k]) + 1}${of(B)}`, `step ${ser.step[k]}/${stepsOf(k)}`);
        if (c) parts.push(`masks left ${c.masksLeft}`, `committed this step ${this.committedText(c)}`);
      }
    } else {
      parts.push(`token step ${s}${of(m.N)}`, `regions decoding ${c ? c.regions : p.regions.length}`);
      parts.push(c ? `committed this step ${this.committedText(c)}` : "nothing committed yet");
    }
    if (live) parts.push("decoding, totals not known yet");
    this.setHeader(parts, this.explain(s, c ? c.committed : 0), c);
  }
  setHeader(parts, caption, c) {
    const text = parts.join(" · ");
    if (text !== this._headerText) {
      this.header.textContent = text;
      // the tooltip says what each count shown counts (one line per count; docs/player.md#counts)
      const tips = Object.keys(COUNT_TIPS).filter((n) => parts.some((t) => t.startsWith(n + " "))).map((n) => `${n}: ${COUNT_TIPS[n]}`);
      if (tips.join("\n") !== this.header.title) this.header.title = tips.join("\n");
      this._headerText = text;
      const d = this.header.dataset;
      d.frame = String(this.frame);
      ["masksLeft", "committed", "tokens", "fillers", "regions", "verified", "accepted"].forEach((key) => {
        if (c && c[key] != null) d[key] = String(c[key]); else delete d[key];
      });
    }
    if (caption !== this._caption) { this.caption.textContent = caption; this._caption = caption; }
  }
  explainDrafts(s, counts) {
    // draft and verify: what this forward verified and what it drafted, in words
    const m = this.m, p = m.p, sp = p.speculative || {};
    const c = [0, 0, 0, 0, 0];
    if (counts) { c[V_DRAFTED] = counts.drafted; c[V_ACCEPTED] = counts.accepted; c[V_REJECTED] = counts.rejected; c[V_DISCARDED] = counts.discarded; c[V_BONUS] = counts.bonus; }
    const n = (k, one, many) => (k === 1 ? `1 ${one}` : `${k} ${many || one + "s"}`);
    if (s === 0) {
      return `Start: the page is encoded (prefill ${fmtS(m.prefill)}). ` + (sp.drafter === sp.verifier
        ? `${sp.drafter} drafts the next tokens in one forward and verifies them in its next one (self-speculative).`
        : `${sp.drafter} drafts the next tokens, ${sp.verifier} verifies them in one forward (speculative).`);
    }
    let verifier = false;
    for (let e = m.tickStart[s - 1]; e < m.tickStart[s]; e++) if (m.erole[e]) { verifier = true; break; }
    const who = sp.drafter === sp.verifier ? sp.drafter : verifier ? sp.verifier : sp.drafter;
    const parts = [];
    const checked = counts ? counts.verified : 0;
    if (checked) {
      let t = `verified ${n(checked, "draft")}: ${c[V_ACCEPTED]} accepted`;
      if (c[V_REJECTED]) t += `, ${c[V_REJECTED]} rejected and replaced by its own token`;
      if (c[V_DISCARDED]) t += `, ${c[V_DISCARDED]} discarded (${c[V_REJECTED] ? "after the rejected one" : "past the end of the text"})`;
      parts.push(t);
    }
    if (c[V_BONUS]) parts.push(`committed ${n(c[V_BONUS], "token")} of its own past the drafts (bonus)`);
    if (c[V_DRAFTED]) parts.push(`drafted ${n(c[V_DRAFTED], "position")} for the next forward to verify`);
    if (!parts.length) parts.push("nothing to verify or draft");
    return `Forward ${s} (${who}): ${parts.join("; ")}.`;
  }
  explain(s, nNow) {
    const m = this.m, p = m.p, ser = p.series, k = s - 1;
    if (s === 0) {
      return m.blockwise
        ? `Start: the page is encoded (prefill ${fmtS(m.prefill)}); each region's first block of ${p.block_length} positions is all masks.`
        : `Start: the page is encoded (prefill ${fmtS(m.prefill)}); each region will be read one token per forward pass.`;
    }
    const lines = ser.regions[k];
    const nLines = lines === 1 ? "1 region" : `${lines} regions`;
    if (!m.blockwise) return `Forward ${s}: every region still decoding (${lines}) appends exactly one token.`;
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
        ? `Forward ${s}: no guess passed the ${th} threshold, so each region committed its most confident guesses instead (the quota): ${positions(nNow)} over ${nLines}.${forced}`
        : `Forward ${s}: ${above === 1 ? "1 guess" : `${above} guesses`} passed the ${th} threshold; regions where too few passed committed their most confident guesses instead (the quota): ${positions(nNow)} over ${nLines}.${forced}`;
    }
    return `Forward ${s}: ${strategy || "policy"} committed ${positions(nNow)} over ${nLines}.${forced}`;
  }
}
