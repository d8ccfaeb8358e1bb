/* What the page's own drawing scripts share (ir_view.js, counters_table.js): `el` makes an element
 * with a class and a text set with textContent, never parsed as HTML (strings come from profiles
 * and bundles). Dash loads every script of assets/ before the page's first callback, so the other
 * scripts look it up when they draw, whatever order the files load in.
 */
(function () {
  "use strict";

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) {
      node.className = cls;
    }
    if (text !== undefined && text !== null) {
      node.textContent = String(text);
    }
    return node;
  }

  window.tilescopeDom = Object.assign({}, window.tilescopeDom, { el: el });
})();
