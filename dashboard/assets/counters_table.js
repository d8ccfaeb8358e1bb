/* The counter tables (Kernel detail, Compare), drawn from the data the server puts on their box
 * (dashboard/detail.py _table: data-table = {head, groups: [[group, [[counter, unit, number…]…]]…]}).
 *
 * Why not Dash components: a Td per cell is ~400 components for one msprof op kernel, and the Dash
 * renderer spent ~0.55 s of page CPU on them at every visit of the tab (only the visible tab is
 * mounted). Built here, the same nodes take milliseconds, as the IR panes do (ir_view.js).
 *
 * Safety: every string (counter names and units come from the profile) is set with textContent,
 * never parsed as HTML.
 */
(function () {
  "use strict";

  function el(tag, cls, text) {
    return window.tilescopeDom.el(tag, cls, text); // dom.js
  }

  var BOX = ".counters-box[data-table]";

  function draw(box) {
    if (box.drawnTable === box.dataset.table) {
      return; // drawn already from this data
    }
    var spec;
    try {
      spec = JSON.parse(box.dataset.table);
    } catch (e) {
      return;
    }
    var headRow = el("tr");
    spec.head.forEach(function (h) {
      headRow.appendChild(el("th", null, h));
    });
    var body = el("tbody");
    spec.groups.forEach(function (group) {
      var title = el("th", "counter-group", group[0]);
      title.colSpan = spec.head.length;
      body.appendChild(el("tr")).appendChild(title);
      group[1].forEach(function (cells) {
        var row = el("tr");
        cells.forEach(function (cell, i) {
          // the counter's name, its unit, then numbers (right-aligned)
          row.appendChild(el("td", i === 0 ? "counter-name" : i === 1 ? null : "num", cell));
        });
        body.appendChild(row);
      });
    });
    var thead = el("thead");
    thead.appendChild(headRow);
    var table = el("table", "counters");
    table.append(thead, body);
    box.replaceChildren(table);
    box.drawnTable = box.dataset.table;
  }

  function drawWithin(node) {
    if (node.nodeType === 1) {
      (node.matches(BOX) ? [node] : node.querySelectorAll(BOX)).forEach(function (box) {
        draw(box);
      });
    }
  }

  // A box appears when its tab is mounted or the server sends a new table, and its data changes when
  // React keeps the element and sets the attribute: both are seen here, whoever made the change.
  new MutationObserver(function (records) {
    records.forEach(function (record) {
      if (record.type === "attributes") {
        drawWithin(record.target);
      } else {
        record.addedNodes.forEach(drawWithin);
      }
    });
  }).observe(document.documentElement, {
    childList: true,
    subtree: true,
    attributes: true,
    attributeFilter: ["data-table"],
  });
})();
