/* The player as an anywidget (mudiff_viz/notebook/widget.py): the joined player script
 * (assets/player/src, mudiff_viz/views/assets.py) is prepended to this file
 * and the result is the widget's ES module. The model holds the payload (views/player.py) and
 * "frame", the position on the forward clock (0 = before the first forward; s = after forward s-1),
 * synced both ways: the player reports where it is, and a notebook cell setting it moves the player.
 */
function currentFrame(player) {
  if (!player.models || !player.models.length) return 0;
  return player.clock === "wall" ? player.models[0].frameAtTime(player.t) : player.s;
}

export default {
  render({ model, el }) {
    const root = document.createElement("div");
    root.className = "mudiff-widget";
    el.appendChild(root);
    const player = globalThis.MudiffPlayer.mount(root, model.get("payload"));
    let applying = false;
    const report = () => {
      const s = currentFrame(player);
      if (!applying && s !== model.get("frame")) {
        model.set("frame", s);
        model.save_changes();
      }
    };
    const redraw = player.redraw.bind(player);
    player.redraw = (force) => { redraw(force); report(); };
    const apply = () => {
      const s = model.get("frame");
      if (s === currentFrame(player)) return;
      applying = true;
      player.pause();
      if (player.clock === "wall") player.seekTime(player.models[0].timeOfFrame(s));
      else player.seekFrame(s);
      applying = false;
      report(); // a frame out of range was clamped: say where the player is
    };
    model.on("change:frame", apply);
    model.on("change:payload", () => { player.load(model.get("payload")); report(); });
    apply();
    return () => {
      model.off("change:frame", apply);
      player.destroy();
    };
  },
};
