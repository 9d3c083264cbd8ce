/* How tokens, times and shares are written: specials compacted, whitespace made visible. */
export const MASK_GLYPH = "\u2591"; // light shade: one monospace cell per masked position
export const FILLER_GLYPH = "\u2219";  // bullet operator: one per discarded position
export const SPECIAL = /^<\|?[A-Za-z_][^<>]{0,18}\|?>$/;
export const EOS_MARK = "EOS"; // the one symbol for every pair's end-of-text token (the legend explains it)
export const END_NAMES = /^(eos|endoftext|end_of_text|im_end|\/s|eot|eot_id)$/i;
export function shortSpecial(text) {
  // "<eos>", "<|endoftext|>", "<|im_end|>" -> "EOS" (one symbol for the end of text, whatever the
  // tokenizer calls it); other specials compact: "<|box_start|>" -> "BOX_ST", visibly not page text
  const name = text.replace(/^<\|?|\|?>$/g, "");
  return END_NAMES.test(name) ? EOS_MARK : name.toUpperCase().slice(0, 6);
}
export function fmtS(x) { return x == null || isNaN(x) ? "–" : x < 10 ? x.toFixed(2) + " s" : x.toFixed(1) + " s"; }
export function pct(p) { return p < 0.001 ? "<0.1%" : (100 * p).toFixed(p < 0.1 ? 1 : 0) + "%"; }
export function visible(text) {
  // show whitespace and control characters so a token is never invisible
  if (text === "") return "∅";
  return text.replace(/ /g, "␣").replace(/\n/g, "↵").replace(/\t/g, "⇥");
}
export function displayToken(text) {
  // keep layout: a newline token shows as a visible mark; specials compact; other text as is
  if (SPECIAL.test(text)) return shortSpecial(text);
  return text.replace(/\n/g, "↵\n");
}
