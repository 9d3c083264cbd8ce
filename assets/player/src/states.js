/* The slot states a frame draws, their names (the card, the legend) and CSS classes. */
// slot states
// (DRAFT and DISCARDED only in draft-and-verify traces: a draft proposed at this forward, a draft
// thrown away unverified because one before it was rejected)
export const UNREACHED = 0, MASKED = 1, GHOST = 2, NOW = 3, DONE = 4, HIDDEN = 5, DRAFT = 6, DISCARDED = 7;
export const STATE_NAMES = ["not yet reached", "masked", "ghost guess", "committed this step", "committed earlier", "hidden",
  "draft (not verified yet)", "draft discarded"];
export const STATE_CLASS = ["st-unreached", "st-masked", "st-ghost", "st-now", "st-done", "st-hidden", "st-draft", "st-discarded"];
// a draft-and-verify forward's verdict at a position (mudiff_viz/core/trace.py VERDICTS)
export const V_DRAFTED = 0, V_ACCEPTED = 1, V_REJECTED = 2, V_DISCARDED = 3, V_BONUS = 4;
export const VERDICT_NAMES = ["drafted", "accepted", "rejected", "discarded", "bonus"];
export const VERDICT_CLASS = ["v-drafted", "v-accepted", "v-rejected", "v-discarded", "v-bonus"];
