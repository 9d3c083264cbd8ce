/* One trace: its indexes, and the state of every slot at a frame (TraceModel.compute). */
import { UNREACHED, MASKED, GHOST, NOW, DONE, HIDDEN, DRAFT, DISCARDED, V_DRAFTED, V_ACCEPTED, V_REJECTED, V_DISCARDED, V_BONUS } from "./states.js";

// ---- one trace: indexes and per-frame state ------------------------------------------------
export class TraceModel {
  constructor(p) {
    this.p = p;
    const s = p.slots, e = p.entries;
    this.n = s.region.length;
    this.N = p.clock.n;
    this.time = p.clock.time;
    this.prefill = p.clock.prefill_s || 0;
    this.wall = Math.max(p.clock.wall_s || 0, this.time.length ? this.time[this.time.length - 1] : 0, this.prefill);
    this.commit = Int32Array.from(s.commit);
    this.open = Int32Array.from(s.open);
    this.close = Int32Array.from(s.close);
    this.filler = Uint8Array.from(s.filler);
    this.stop = Uint8Array.from(s.stop);
    this.ids = Int32Array.from(s.id);
    this.conf = Float32Array.from(s.conf, (v) => v / 10000);
    this.eslot = Int32Array.from(e.slot);
    this.ecand = Int32Array.from(e.cand);
    this.econf = Float32Array.from(e.conf, (v) => v / 10000);
    this.ecommit = Uint8Array.from(e.commit);
    this.etopId = Int32Array.from(e.topk_id);
    this.etopP = Float32Array.from(e.topk_p, (v) => v / 1000);
    this.tickStart = Int32Array.from(e.tick_start);
    this.maskIds = new Set(p.mask_ids || []);
    // draft and verify: per entry its verdict, the draft it verified (-1: none), whether the verifier
    // model ran its forward; per slot the verdict that committed it (-1: none)
    this.speculative = !!e.verdict;
    if (this.speculative) {
      this.everdict = Int8Array.from(e.verdict);
      this.edraft = Int32Array.from(e.draft);
      this.erole = Uint8Array.from(e.role);
      this.finalVerdict = new Int8Array(s.region.length).fill(-1);
      for (let j = 0; j < this.everdict.length; j++) {
        const v = this.everdict[j];
        if (this.ecommit[j] && (v === V_ACCEPTED || v === V_REJECTED || v === V_BONUS)) this.finalVerdict[this.eslot[j]] = v;
      }
      this.verdictAt = new Int8Array(s.region.length); // per frame: the verdict at each slot (-1: none)
      this.verifiedAt = new Int32Array(s.region.length); // ... and the entry that gave it
    }
    // entries per slot (CSR) for ghost histories; the entry's tick from tickStart
    const counts = new Int32Array(this.n + 1);
    for (let i = 0; i < this.eslot.length; i++) counts[this.eslot[i] + 1]++;
    for (let i = 0; i < this.n; i++) counts[i + 1] += counts[i];
    this.slotEntryStart = counts;
    const fill = counts.slice(0, this.n);
    this.slotEntries = new Int32Array(this.eslot.length);
    for (let i = 0; i < this.eslot.length; i++) this.slotEntries[fill[this.eslot[i]]++] = i;
    this.entryTick = new Int32Array(this.eslot.length);
    for (let k = 0; k < this.N; k++) for (let i = this.tickStart[k]; i < this.tickStart[k + 1]; i++) this.entryTick[i] = k;
    // per-frame output buffers
    this.state = new Uint8Array(this.n);
    this.entryAt = new Int32Array(this.n);
    const ser = p.series;
    this.cumKept = new Int32Array(this.N + 1);
    // tokens of the text committed by each forward (the payload's counts: a snapshot's pending ones included)
    for (let k = 0; k < this.N; k++) this.cumKept[k + 1] = this.cumKept[k] + ser.kept[k];
    this.nKept = 0;
    for (let i = 0; i < this.n; i++) if (!this.filler[i]) this.nKept++;
    // block-wise decoders (diffusion or any registered one) carry a block length; AR does not
    this.blockwise = p.block_length != null;
    this.region = Int32Array.from(s.region);
    this.pos = Int32Array.from(s.pos);
    this.occluded = Uint8Array.from(s.occluded || []);
    this.nOccludedBoxes = (p.page && p.page.occluded ? p.page.occluded.length : 0);
    this.hasOcclusion = this.nOccludedBoxes > 0 || this.occluded.some((v) => v);
    this.order = this.blockwise && p.recorded ? this.decodingOrder() : null;
    // a filler is drawn while its block is open: through frame close[i] (its block's last forward
    // is close[i]; frame close[i] + 1 shows the block closed, the filler dropped, as the decoder
    // drops it). In a streamed snapshot the last recorded forward may not end the block: kept.
    this.partial = !!p.partial;
    this.fillerEnd = new Int32Array(this.n).fill(this.N + 1);
    for (let i = 0; i < this.n; i++) {
      if (!this.filler[i] || this.close[i] < 0) continue;
      this.fillerEnd[i] = this.partial && this.close[i] >= this.N - 1 ? this.N + 1 : this.close[i];
    }
  }
  decodingOrder() {
    // per committed token (fillers excluded): its position in its block and the denoising step of
    // its block at which it was committed (commit - open + 1: a block's slots all open at its first
    // forward); sorted by commit forward, so "committed up to frame s" is a prefix
    const L = this.p.block_length || 1, n = this.n;
    const blockEnd = new Map();
    const bkey = (i) => this.region[i] * 1048576 + Math.floor(this.pos[i] / L);
    for (let i = 0; i < n; i++) {
      if (this.commit[i] < 0) continue;
      const k = bkey(i);
      const v = blockEnd.get(k);
      if (v === undefined || this.commit[i] > v) blockEnd.set(k, this.commit[i]);
    }
    const idx = [];
    for (let i = 0; i < n; i++) if (!this.filler[i] && this.commit[i] >= 0) idx.push(i);
    idx.sort((a, b) => this.commit[a] - this.commit[b] || a - b);
    const m = idx.length;
    const slot = Int32Array.from(idx), x = new Int32Array(m), y = new Int32Array(m), at = new Int32Array(m);
    const first = new Int32Array(m + 1), occ = new Int32Array(m + 1), occLast = new Int32Array(m + 1);
    let ymax = 1;
    for (let j = 0; j < m; j++) {
      const i = idx[j];
      x[j] = this.pos[i] % L;
      y[j] = this.commit[i] - this.open[i] + 1;
      at[j] = this.commit[i];
      ymax = Math.max(ymax, y[j]);
      const steps = blockEnd.get(bkey(i)) - this.open[i] + 1;
      first[j + 1] = first[j] + (y[j] === 1 ? 1 : 0);
      occ[j + 1] = occ[j] + (this.occluded[i] ? 1 : 0);
      occLast[j + 1] = occLast[j] + (this.occluded[i] && y[j] === steps ? 1 : 0);
    }
    return { slot, x, y, at, first, occ, occLast, ymax, L, n: m };
  }
  committedBefore(f) {
    // tokens (of the decoding-order chart) committed by forwards < f: a prefix of the sorted order
    const at = this.order.at;
    let lo = 0, hi = at.length;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (at[mid] < f) lo = mid + 1; else hi = mid; }
    return lo;
  }
  slotKey(i) { return this.region[i] + ":" + this.pos[i]; }
  slotOfKey(key) {
    // the slot of (region, position) in this model: slot indexes shift when a snapshot grows
    for (let i = 0; i < this.n; i++) if (this.region[i] + ":" + this.pos[i] === key) return i;
    return -1;
  }
  tokenText(id) {
    if (id < 0) return "";
    const v = this.p.vocab[String(id)];
    return v === undefined ? "<" + id + ">" : v;
  }
  frameAtTime(t) {
    // forwards finished by time t (binary search on the monotone clock)
    if (t < this.prefill) return 0;
    let lo = 0, hi = this.N;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (this.time[mid] <= t) lo = mid + 1; else hi = mid; }
    return lo;
  }
  timeOfFrame(s) { return s <= 0 ? this.prefill : this.time[Math.min(s, this.N) - 1]; }
  compute(s, keepFiller) {
    // keepFiller: draw the discarded positions after their block closed too (the player's toggle)
    s = Math.max(0, Math.min(s, this.N));
    const st = this.state, ea = this.entryAt, c = this.commit, o = this.open;
    const last = s - 1;
    for (let i = 0; i < this.n; i++) {
      ea[i] = -1;
      const ci = c[i];
      if (this.filler[i] && s > this.fillerEnd[i] && (!keepFiller || ci < 0)) st[i] = HIDDEN;
      else if (ci >= 0 && ci < last) st[i] = DONE;
      else if (ci >= 0 && ci === last) st[i] = NOW;
      // masked once a forward has seen it (frame s shows forward s - 1), so the cells drawn masked
      // are the header's "masks left"; frame 0 draws the first blocks about to be denoised
      else if (o[i] < s || (s === 0 && o[i] === 0)) st[i] = MASKED;
      else st[i] = UNREACHED;
    }
    if (last >= 0) {
      for (let e = this.tickStart[last]; e < this.tickStart[last + 1]; e++) {
        const i = this.eslot[e];
        ea[i] = e;
        if (!this.ecommit[e] && st[i] === MASKED && !this.maskIds.has(this.ecand[e])) st[i] = GHOST;
      }
    }
    if (this.speculative) this.computeDrafts(last);
    return s;
  }
  computeDrafts(last) {
    // forward `last` verified drafts (accepted, rejected, discarded, bonus) and proposed new ones: a
    // position verified and drafted again in one forward shows its new draft
    const st = this.state, ea = this.entryAt, va = this.verdictAt, ve = this.verifiedAt;
    va.fill(-1);
    ve.fill(-1);
    if (last < 0) return;
    const a = this.tickStart[last], b = this.tickStart[last + 1];
    for (let e = a; e < b; e++) {
      const v = this.everdict[e], i = this.eslot[e];
      if (v === V_DRAFTED || v < 0) continue;
      va[i] = v;
      ve[i] = e;
      if (st[i] === NOW) ea[i] = e;
      else if (st[i] === MASKED || st[i] === GHOST) {
        st[i] = v === V_DISCARDED && this.edraft[e] >= 0 ? DISCARDED : MASKED;
        ea[i] = e;
      }
    }
    for (let e = a; e < b; e++) {
      const i = this.eslot[e];
      if (this.everdict[e] !== V_DRAFTED) continue;
      if (st[i] === MASKED || st[i] === GHOST || st[i] === DISCARDED) { st[i] = DRAFT; ea[i] = e; }
    }
  }
  draftHistory(i) {
    // the slot's drafts and verdicts over forwards: [{tick, verdict, cand, conf, draft, verifier, e}]
    const out = [];
    for (let j = this.slotEntryStart[i]; j < this.slotEntryStart[i + 1]; j++) {
      const e = this.slotEntries[j];
      if (this.everdict[e] < 0) continue;
      out.push({ tick: this.entryTick[e], verdict: this.everdict[e], cand: this.ecand[e], conf: this.econf[e],
        draft: this.edraft[e], verifier: !!this.erole[e], e });
    }
    // one forward: its verdict first, then its new draft (the order the record gives)
    out.sort((x, y) => x.tick - y.tick || (x.verdict === V_DRAFTED) - (y.verdict === V_DRAFTED) || x.e - y.e);
    return out;
  }
  history(i) {
    // the slot's guesses over forwards: [{tick, cand, conf, committed}]
    const out = [];
    for (let j = this.slotEntryStart[i]; j < this.slotEntryStart[i + 1]; j++) {
      const e = this.slotEntries[j];
      out.push({ tick: this.entryTick[e], cand: this.ecand[e], conf: this.econf[e], committed: !!this.ecommit[e], e });
    }
    out.sort((a, b) => a.tick - b.tick);
    return out;
  }
  topk(e) {
    const out = [];
    for (let j = 0; j < 5; j++) {
      const id = this.etopId[5 * e + j];
      if (id >= 0) out.push({ id, p: this.etopP[5 * e + j] });
    }
    return out;
  }
}
