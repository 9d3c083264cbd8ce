/* mudiff-viz player: replays a whole decode trace in the browser, frame by frame.
 *
 * Input: the payload built by mudiff_viz/views/player.py (one trace), or {mode: "compare", panes:
 * [payload, ...]} for two or more traces on one shared clock; {layout: "grid"} lays four of them out
 * 2x2 (the Semantic Shuffle tab), and {options: {colourBy: ...}} picks the starting colour mode.
 * A pane may carry "short" (its name in chart readouts), "colour" and "dash" (its chart style). Everything is computed here from that one
 * payload: no server round trip per frame.
 *
 * Streaming: a payload with "stream" (an id) and "partial": true is a snapshot of a decode still
 * running; load() (or a second MudiffPlayer.mount on the same element, which reuses the player) with
 * the same stream id keeps the user's place (frame or time, playing, options, pinned and focused
 * token; at the last frame it follows the new end) and returns true. A "decoding… (live)" badge
 * shows while partial. Block-wise traces are told by "block_length" (AR has none), not by name.
 *
 * Frames: s = 0..N. Frame 0 is the start of decoding (prefill done, nothing committed); frame s > 0
 * shows the outcome of forward s-1: what it committed and the guesses it left on masked positions.
 * Wall-time clock: time t maps to the number of forwards finished by t.
 *
 * Model text is data, never markup: every string from the trace goes through textContent or
 * setAttribute. Never innerHTML.
 *
 * This is the entry module. The modules of this folder are ES modules; mudiff_viz/views/assets.py
 * joins them into one classic script (imports dropped, exports unmarked, one function scope) for
 * the app, the offline replay and the notebook widget. docs/player.md has the module map.
 */
import { STATE_NAMES } from "./states.js";
import { Player } from "./player.js";

function injectCss(css) {
  if (!css || typeof document === "undefined" || document.getElementById("mudiff-player-css")) return;
  const style = document.createElement("style");
  style.id = "mudiff-player-css";
  style.textContent = css;
  document.head.appendChild(style);
}

globalThis.MudiffPlayer = {
  mount(root, payload, css) {
    // a second mount on the same element reuses its player: a later snapshot of the decode on
    // screen (same stream id) keeps the user's place; anything else replaces the result
    injectCss(css);
    let player = root.__mudiffPlayer;
    if (!player) {
      player = new Player(root);
      root.__mudiffPlayer = player;
    }
    player.load(payload);
    return player;
  },
  STATE_NAMES,
};
