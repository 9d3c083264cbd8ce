/* Player methods: the token card (hover tooltip or pinned card) and pinning. */
import { GHOST, MASKED, DRAFT, STATE_NAMES, V_DRAFTED, V_ACCEPTED, V_REJECTED, V_DISCARDED, V_BONUS, VERDICT_NAMES } from "./states.js";
import { el } from "./dom.js";
import { fmtS, pct, visible } from "./format.js";

export const HINT = "Hover a token or a box for its alternatives; click or tap to pin it here. Keyboard: Tab to the text, arrow keys move between tokens, Enter pins, Esc unpins.";
// how a committed token of a draft-and-verify trace got there (by its verdict)
const FINAL_VERDICT = { [V_ACCEPTED]: "an accepted draft", [V_REJECTED]: "the verifier's token in place of a rejected draft",
  [V_BONUS]: "the verifier's own token (bonus: no draft here)" };

// Player methods: token card
export class TokenCard {
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
    status.appendChild(el("strong", "", STATE_NAMES[(state === GHOST || state === DRAFT) && !this.opts.ghosts ? MASKED : state]));
    // a trace imported from the release's generate knows each commit's forward and time, no confidences
    const imported = p.params && p.params.imported_from;
    const withConf = imported ? "" : ` with confidence ${pct(m.filler[i] ? (e >= 0 ? m.econf[e] : 0) : m.conf[i])}`;
    if (c >= 0) status.appendChild(el("span", "", ` · committed at forward ${c + 1} (t = ${fmtS(m.time[c])})${withConf}`));
    else status.appendChild(el("span", "", " · never committed (decode stopped)"));
    if (m.speculative && m.finalVerdict[i] >= 0) status.appendChild(el("span", "mp-d-verdict", " · " + FINAL_VERDICT[m.finalVerdict[i]]));
    box.appendChild(status);
    if (m.occluded[i]) box.appendChild(el("div", "mp-d-occ", "This word was blanked on the page (occlusion probe): the model had only the context to go on."));
    if (imported) {
      box.appendChild(el("div", "mp-d-label", `Imported from the ${imported}: it keeps when each token was committed, not the guesses, confidences or top-5.`));
      return;
    }
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
    if (m.speculative) { this.showDraftHistory(box, m, i, s, pinned); return; }
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
  showDraftHistory(box, m, i, s, pinned) {
    // draft and verify: every forward that drafted at this position or verified a draft there, by
    // which model, with what token and confidence, and the verdict (what replaced a rejected draft)
    const sp = m.p.speculative || {}, self = sp.drafter === sp.verifier;
    const hist = m.draftHistory(i).filter((h) => h.verdict !== V_DISCARDED || h.draft >= 0);
    if (!hist.length) { box.appendChild(el("div", "mp-d-label", "No draft was made or verified here.")); return; }
    const nd = hist.filter((h) => h.verdict === V_DRAFTED).length;
    box.appendChild(el("div", "mp-d-label", `Draft history: drafted ${nd} time${nd === 1 ? "" : "s"}, ${hist.length - nd} verdict${hist.length - nd === 1 ? "" : "s"}`));
    const list = el("ol", "mp-dh");
    // the floating tooltip keeps to the latest rows; the pinned card lists them all
    const TIP_ROWS = 6;
    if (!pinned && hist.length > TIP_ROWS) {
      list.appendChild(el("li", "mp-dh-more", `… ${hist.length - TIP_ROWS} earlier (click to pin the card: all of them)`));
      hist.splice(0, hist.length - TIP_ROWS);
    }
    const tok = (id, cls) => el("span", "mp-dh-tok" + (cls ? " " + cls : ""), visible(m.tokenText(id)));
    hist.forEach((h) => {
      const li = el("li", VERDICT_NAMES[h.verdict] + (h.tick === s - 1 ? " current" : ""));
      li.dataset.verdict = VERDICT_NAMES[h.verdict];
      li.appendChild(el("span", "mp-dh-at", `forward ${h.tick + 1}`));
      if (h.verdict === V_DRAFTED) {
        li.appendChild(el("span", "", "drafted"));
        li.appendChild(tok(h.cand));
        li.appendChild(el("span", "", `(${pct(h.conf)})`));
      } else if (h.verdict === V_ACCEPTED) {
        li.appendChild(el("span", "", "accepted"));
        li.appendChild(tok(h.draft));
        li.appendChild(el("span", "", `(verifier ${pct(h.conf)})`));
      } else if (h.verdict === V_REJECTED) {
        li.appendChild(el("span", "", "rejected"));
        li.appendChild(tok(h.draft, "mp-dh-old"));
        li.appendChild(el("span", "", "→ replaced by"));
        li.appendChild(tok(h.cand));
        li.appendChild(el("span", "", `(${pct(h.conf)})`));
      } else if (h.verdict === V_DISCARDED) {
        li.appendChild(el("span", "", "discarded"));
        li.appendChild(tok(h.draft));
        li.appendChild(el("span", "", "(unverified: after a rejected draft or the end of text)"));
      } else if (h.verdict === V_BONUS) {
        li.appendChild(el("span", "", "bonus: its own token"));
        li.appendChild(tok(h.cand));
        li.appendChild(el("span", "", `(${pct(h.conf)}, no draft here)`));
      }
      const role = h.verdict === V_DRAFTED ? "drafter" : "verifier";
      const who = self ? `${sp.drafter}, as ${role}` : h.verifier ? sp.verifier : sp.drafter;
      li.appendChild(el("span", "mp-dh-who", who));
      list.appendChild(li);
    });
    box.appendChild(list);
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
}
