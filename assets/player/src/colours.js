/* Colour ramps (colour-blind safe) and the panes' own colours. */
// ---- colour ramps (colour-blind safe) -------------------------------------------------------
export const CIVIDIS = [[0, 34, 78], [18, 53, 112], [59, 73, 108], [87, 93, 109], [112, 113, 115],
  [138, 134, 120], [165, 156, 116], [195, 179, 105], [225, 204, 85], [255, 234, 70]];
export const VIRIDIS = [[68, 1, 84], [72, 40, 120], [62, 74, 137], [49, 104, 142], [38, 130, 142],
  [31, 158, 137], [53, 183, 121], [110, 206, 88], [181, 222, 43], [253, 231, 37]];
export const RAMP_STEPS = 101;

export function buildRamp(stops, towardWhite) {
  const out = [];
  for (let i = 0; i < RAMP_STEPS; i++) {
    const t = i / (RAMP_STEPS - 1);
    const x = t * (stops.length - 1);
    const j = Math.min(stops.length - 2, Math.floor(x));
    const f = x - j;
    const c = [0, 1, 2].map((k) => stops[j][k] + (stops[j + 1][k] - stops[j][k]) * f);
    const m = c.map((v) => Math.round(v + (255 - v) * towardWhite));
    const lum = (0.2126 * m[0] + 0.7152 * m[1] + 0.0722 * m[2]) / 255;
    out.push({ bg: `rgb(${m[0]},${m[1]},${m[2]})`, fg: lum < 0.5 ? "#fff" : "#111",
      solid: `rgb(${Math.round(c[0])},${Math.round(c[1])},${Math.round(c[2])})` });
  }
  return out;
}
export const RAMPS = { confidence: buildRamp(CIVIDIS, 0.3), commit: buildRamp(VIRIDIS, 0.3) };
// "correct vs ground truth": index 0 wrong (Okabe-Ito orange), 50 unknown (grey), 100 right (sky blue)
RAMPS.correct = RAMPS.confidence.map((_, i) => (i < 25 ? { bg: "#f3c677", fg: "#111", solid: "#e69f00" }
  : i > 75 ? { bg: "#b9dcf2", fg: "#111", solid: "#56b4e9" } : { bg: "#e3e5e8", fg: "#111", solid: "#b0b4ba" }));
// "draft verdict" (draft-and-verify traces): 100 an accepted draft (Okabe-Ito bluish green), 0 the
// verifier's token in place of a rejected draft (vermilion), 50 the verifier's own token (grey)
RAMPS.verdict = RAMPS.confidence.map((_, i) => (i < 25 ? { bg: "#f4c09b", fg: "#111", solid: "#d55e00" }
  : i > 75 ? { bg: "#b3e0d0", fg: "#111", solid: "#009e73" } : { bg: "#e3e5e8", fg: "#111", solid: "#b0b4ba" }));
export const PANE_COLOURS = ["#0072b2", "#d55e00", "#009e73", "#cc79a7"]; // Okabe-Ito
// each decoder's own colour: the same as mudiff_viz/views/palette.py (tests/test_compare_verdict.py checks)
export const DECODER_COLOURS = { diffusion: "#0072b2", ar: "#d55e00", "self-speculative": "#009e73", speculative: "#cc79a7" };
