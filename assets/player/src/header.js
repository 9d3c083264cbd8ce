/* A pane's header line and the caption that explains the frame in words. */
import { fmtS } from "./format.js";
import { V_DRAFTED, V_ACCEPTED, V_REJECTED, V_DISCARDED, V_BONUS } from "./states.js";

// Pane methods: header and caption
export class PaneHeader {
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
    } else if (m.speculative) {
      const c = this.verdictCounts(s);
      parts.push(`forward ${s}${of(m.N)}`, `lines decoding ${s === 0 ? p.regions.length : nActive}`,
        `drafts verified ${c[V_ACCEPTED] + c[V_REJECTED] + c[V_DISCARDED]}`, `committed this step ${nNow}`);
      if (live) parts.push("decoding, totals not known yet");
      this.setHeader(parts, this.explainDrafts(s, c));
      return;
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
  verdictCounts(s) {
    // entries of forward s - 1 by verdict (drafted, accepted, rejected, discarded, bonus)
    const m = this.m, c = [0, 0, 0, 0, 0];
    if (s < 1 || s > m.N) return c;
    for (let e = m.tickStart[s - 1]; e < m.tickStart[s]; e++) {
      const v = m.everdict[e];
      if (v === V_DISCARDED && m.edraft[e] < 0) continue; // a query past the drafts: nothing was thrown away
      if (v >= 0) c[v]++;
    }
    return c;
  }
  explainDrafts(s, c) {
    // draft and verify: what this forward verified and what it drafted, in words
    const m = this.m, p = m.p, sp = p.speculative || {};
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
    const checked = c[V_ACCEPTED] + c[V_REJECTED] + c[V_DISCARDED];
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
}
