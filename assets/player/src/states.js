/* The slot states a frame draws, their names (the card, the legend) and CSS classes. */
// slot states
export const UNREACHED = 0, MASKED = 1, GHOST = 2, NOW = 3, DONE = 4, HIDDEN = 5;
export const STATE_NAMES = ["not yet reached", "masked", "ghost guess", "committed this step", "committed earlier", "hidden"];
export const STATE_CLASS = ["st-unreached", "st-masked", "st-ghost", "st-now", "st-done", "st-hidden"];
