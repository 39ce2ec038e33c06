// The Sessions page: filter and sort the table in the page (no server, no network).
(function () {
  "use strict";
  const form = document.getElementById("session-filters");
  const table = document.getElementById("all-sessions");
  if (!form || !table) return;
  const body = table.tBodies[0];
  const rows = Array.from(body.rows);
  const numeric = new Set(["prompts", "calls", "failed", "active", "cost"]);
  let sortKey = "started", descending = true;

  function value(row, key) {
    const v = row.dataset[key] || "";
    if (numeric.has(key)) return v === "" ? -1 : Number(v);
    return v;
  }

  function apply() {
    const f = Object.fromEntries(new FormData(form).entries());
    let shown = 0;
    for (const row of rows) {
      const d = row.dataset;
      const keep = (!f.project || d.project === f.project) && (!f.client || d.client === f.client)
        && (!f.month || d.month === f.month) && (!f.model || d.models.split("|").includes(f.model))
        && (!f.failed || Number(d.failed) > 0) && (!f.costly || d.cost !== "")
        && (f.empty || !row.classList.contains("empty"));
      row.hidden = !keep;
      if (keep) shown += 1;
    }
    form.elements.shown.value = shown + " shown";
  }

  function sort(key) {
    descending = key === sortKey ? !descending : key !== "title" && key !== "project" && key !== "client";
    sortKey = key;
    rows.sort(function (a, b) {
      const x = value(a, key), y = value(b, key);
      const c = x < y ? -1 : x > y ? 1 : 0;
      return descending ? -c : c;
    });
    for (const row of rows) body.appendChild(row);
    for (const th of table.tHead.rows[0].cells) {
      th.setAttribute("aria-sort", th.dataset.sort === key ? (descending ? "descending" : "ascending") : "none");
    }
  }

  form.addEventListener("change", apply);
  for (const th of table.tHead.rows[0].cells) {
    th.addEventListener("click", function () { sort(th.dataset.sort); });
    th.tabIndex = 0;
    th.addEventListener("keydown", function (e) { if (e.key === "Enter") sort(th.dataset.sort); });
  }
  apply();
})();
