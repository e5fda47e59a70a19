"use strict";
/* The run page: filter, sort and expand the question table. */
(function () {
  var table = document.getElementById("questions");
  var body = table.tBodies[0];
  var rows = Array.prototype.slice.call(body.querySelectorAll("tr.q"));
  var conversations = null;
  var filters = ["f-category", "f-correct", "f-diagnosis", "f-text"].map(function (id) {
    return document.getElementById(id);
  });
  function detailOf(row) {
    var next = row.nextElementSibling;
    return next && next.classList.contains("detail") ? next : null;
  }
  function apply() {
    var cat = filters[0].value, correct = filters[1].value, diag = filters[2].value;
    var text = filters[3].value.trim().toLowerCase(), shown = 0;
    rows.forEach(function (row) {
      var ok = (!cat || row.dataset.category === cat) && (!correct || row.dataset.correct === correct) &&
        (!diag || row.dataset.diagnosis === diag) &&
        (!text || row.cells[1].textContent.toLowerCase().indexOf(text) >= 0);
      row.hidden = !ok;
      var d = detailOf(row);
      if (d) d.hidden = !ok;
      if (ok) shown += 1;
    });
    document.getElementById("count").textContent = shown + " of " + rows.length + " questions";
  }
  filters.forEach(function (f) { f.addEventListener("input", apply); });
  table.tHead.querySelectorAll("th[data-key]").forEach(function (th) {
    th.querySelector("button").addEventListener("click", function () {
      var key = th.dataset.key, num = th.dataset.type === "num";
      var dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
      table.tHead.querySelectorAll("th").forEach(function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
      rows.sort(function (a, b) {
        var x = a.dataset[key], y = b.dataset[key];
        if (num) {
          x = x === "" ? -Infinity : Number(x); y = y === "" ? -Infinity : Number(y);
          return dir * (x - y) || Number(a.dataset.n) - Number(b.dataset.n);
        }
        return dir * x.localeCompare(y, undefined, { numeric: true });
      });
      var details = rows.map(detailOf), sorted = document.createDocumentFragment();
      rows.forEach(function (row, i) {
        sorted.appendChild(row);
        if (details[i]) sorted.appendChild(details[i]);
      });
      body.appendChild(sorted);
    });
  });
  body.addEventListener("click", function (event) {
    var button = event.target.closest("button.expand");
    if (!button) return;
    var row = button.closest("tr"), open = button.getAttribute("aria-expanded") === "true";
    var d = detailOf(row);
    button.setAttribute("aria-expanded", open ? "false" : "true");
    button.textContent = open ? "▸" : "▾";
    if (d) { d.hidden = open; return; }
    if (!conversations) conversations = JSON.parse(document.getElementById("conversations").textContent);
    var data = JSON.parse(document.getElementById("d-" + row.dataset.n).textContent);
    var ev = data.record;
    ev.sources = conversations[data.conversation];
    var cell = qemem.el("div", { class: "detail-body" });
    var tr = qemem.el("tr", { class: "detail" }, qemem.el("td", { colspan: row.cells.length }, cell));
    row.parentNode.insertBefore(tr, row.nextSibling);
    cell.appendChild(qemem.el("div", { class: "answer" }, "Answer: " + (ev.answer || "(none)")));
    cell.appendChild(qemem.el("div", { class: "muted", text: "judge: " + (data.labels.join(", ") || "none") }));
    qemem.render(cell, ev, { header: false, gold: data.gold, evidence: data.evidence_ids,
      prefix: "q" + row.dataset.n + "-" });
  });
  apply();
})();
