/* The IR view's panes, drawn from the data the server sends (dashboard/cb_ir.py on_ir,
 * dashboard/ir_view.py stage_data).
 *
 * Why not Dash components: the Dash renderer spends seconds on a few thousand of them (one per
 * line and coloured token), again on every visit of the tab, since only the visible tab is
 * mounted (issue #15). Built here, the same nodes take milliseconds.
 *
 * Safety: every string from the bundle (code, file names, the finding label) is set with
 * textContent or createTextNode, never parsed as HTML; class names are Pygments' short names.
 */
(function () {
  "use strict";

  function el(tag, cls, text) {
    return window.tilescopeDom.el(tag, cls, text); // dom.js
  }

  function pane(p) {
    var box = el("div", "ir-pane");
    var head = el("div", "ir-head");
    var file = el("code", "ir-file", p.file);
    if (p.path !== p.file) {
      file.title = p.path;
    }
    head.append(el("span", "ir-title", p.title), file);
    var code = el("pre", "ir-code");
    code.id = p.id;
    var marked = new Set(p.marked);
    var heat = new Map((p.heat || []).map(function (h) { return [h[0], h]; }));
    var hottest = Math.max.apply(null, [0].concat((p.heat || []).map(function (h) { return h[1]; })));
    var rows = document.createDocumentFragment();
    p.lines.forEach(function (runs, i) {
      var n = p.first + i;
      var row = el("div", marked.has(n) ? "ir-line hl" : "ir-line");
      row.dataset.line = String(n);
      row.appendChild(el("span", "ln", n));
      for (var j = 0; j + 1 < runs.length; j += 2) {
        row.appendChild(runs[j] ? el("span", runs[j], runs[j + 1]) : document.createTextNode(runs[j + 1]));
      }
      var h = heat.get(n);
      if (heat.size) {
        // a gutter with the line's share, and a bar behind the line as long as its share against
        // the pane's hottest line; the full label (share, amount, group) on hover
        row.insertBefore(el("span", "heat-val", h ? (100 * Number(h[1])).toFixed(1) + " %" : ""), row.firstChild);
      }
      if (h) {
        var width = hottest > 0 ? Math.max(2, Math.round((100 * Number(h[1])) / hottest)) : 0;
        row.classList.add("heat");
        row.style.setProperty("--heat", width + "%");
        row.dataset.share = String(h[1]);
        row.title = String(h[2]);
      }
      rows.appendChild(row);
    });
    code.appendChild(rows);
    box.append(head, el("div", "ir-marks", p.summary), code);
    return box;
  }

  function hottestLine(code) {
    var best = null;
    code.querySelectorAll(".ir-line.heat").forEach(function (row) {
      if (!best || Number(row.dataset.share) > Number(best.dataset.share)) {
        best = row;
      }
    });
    return best;
  }

  function scrollToMarks(root) {
    root.querySelectorAll(".ir-code").forEach(function (code) {
      // the marked lines, else the hottest measured line
      var hit = code.querySelector(".ir-line.hl") || hottestLine(code);
      code.scrollTop = hit ? Math.max(hit.offsetTop - code.clientHeight / 3, 0) : 0;
    });
  }

  function same(a, b) {
    return (a === undefined ? null : a) === (b === undefined ? null : b);
  }

  // data: {for: {profile, finding, kernel}, info, panes}; drawn when it is for the selection shown
  // in the dropdowns, else the panes are marked stale until the server's answer arrives.
  function renderIr(data, tab, finding, kernel, profile) {
    var noUpdate = window.dash_clientside.no_update;
    if (tab !== "ir") {
      return noUpdate;
    }
    var frames = 0;
    function draw() {
      var root = document.getElementById("ir-panes");
      var info = document.getElementById("ir-info");
      if (!root || !info) {
        if (frames++ < 120) {
          window.requestAnimationFrame(draw); // the tab's content is mounted after this callback
        }
        return;
      }
      var want = data && data.for;
      var current =
        want && same(want.profile, profile) && same(want.finding, finding) && same(want.kernel, kernel);
      if (!current && refused && same(refused.for.profile, profile) && same(refused.for.finding, finding) &&
          same(refused.for.kernel, kernel)) {
        showFailure(refused); // the server refused this very selection: say why, not "Marking…"
        return;
      }
      if (!current) {
        root.classList.add("ir-stale");
        root.setAttribute("aria-busy", "true");
        info.textContent =
          finding === null || finding === undefined ? "Loading the IR…" : "Marking the lines of the selected finding…";
        return;
      }
      var key = JSON.stringify(want);
      if (root.dataset.shown !== key) {
        root.replaceChildren.apply(root, data.panes.map(pane));
        root.dataset.shown = key;
        scrollToMarks(root);
      }
      root.classList.remove("ir-stale");
      root.removeAttribute("aria-busy");
      info.classList.remove("ir-error");
      info.textContent = data.info;
    }
    draw();
    return noUpdate;
  }

  // A refused answer for the IR data (dashboard.guard's 400: a profile that cannot be read, a value
  // the server will not take) leaves ir-data as it was, and the info line said "Marking…" forever
  // (#15): watch the IR callback's answers and put the server's one line there instead.
  var refused = null; // {for: {profile, finding, kernel}, status, why}: the last refused selection

  function showFailure(failure) {
    var root = document.getElementById("ir-panes");
    var info = document.getElementById("ir-info");
    if (!info) {
      return;
    }
    info.textContent =
      "Could not show the IR (HTTP " + failure.status + ")" + (failure.why ? ": " + failure.why : "");
    info.classList.add("ir-error");
    if (root) {
      root.classList.remove("ir-stale");
      root.removeAttribute("aria-busy");
    }
  }

  // The selection a callback request was for, from its inputs ({id, property, value} each).
  function selectionOf(body) {
    var sel = { profile: null, finding: null, kernel: null };
    var ids = { profile: "profile", "ir-finding": "finding", "ir-kernel": "kernel" };
    try {
      (JSON.parse(body).inputs || []).forEach(function (inp) {
        if (inp && ids[inp.id] && inp.property === "value") {
          sel[ids[inp.id]] = inp.value === undefined ? null : inp.value;
        }
      });
    } catch (e) {
      return sel;
    }
    return sel;
  }

  var fetchFirst = window.fetch;
  window.fetch = function (input, init) {
    var answer = fetchFirst.apply(this, arguments);
    var url = typeof input === "string" ? input : (input && input.url) || "";
    var body = init && typeof init.body === "string" ? init.body : "";
    if (url.indexOf("_dash-update-component") < 0 || body.indexOf("ir-data.data") < 0) {
      return answer;
    }
    return answer.then(function (resp) {
      if (resp.status >= 400) {
        resp
          .clone()
          .text()
          .then(function (text) {
            var why = (text || "").trim().split("\n")[0].slice(0, 300);
            refused = { for: selectionOf(body), status: resp.status, why: why };
            showFailure(refused);
          });
      } else {
        refused = null;
        var info = document.getElementById("ir-info");
        if (info) {
          info.classList.remove("ir-error");
        }
      }
      return resp;
    });
  };

  window.dash_clientside = Object.assign({}, window.dash_clientside, {
    tilescope: Object.assign({}, (window.dash_clientside || {}).tilescope, { renderIr: renderIr }),
  });
})();
