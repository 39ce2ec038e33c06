// Search without a server: the prebuilt index (search-index.js: per term, the documents holding it and
// their BM25 weight - the warehouse's search() weights) summed over the query's words. Served by
// `python -m pipeline serve`, the page asks the live search API first. Results are built with
// textContent only: nothing from the history is ever parsed as HTML.
(function () {
  "use strict";
  var CJK = "\\p{Script=Han}\\p{Script=Hiragana}\\p{Script=Katakana}\\p{Script=Hangul}";
  var cjkRuns = new RegExp("[" + CJK + "]+", "gu");
  var cjkPairs = new RegExp("[" + CJK + "]{2,}", "gu");

  // the same words as the SQL macro tokenize(): camelCase split, lower case, letters and digits, 2+
  // characters; character pairs of Chinese, Japanese and Korean runs
  function tokenize(text) {
    var s = text.replace(cjkRuns, " ").replace(/([a-z0-9])([A-Z])/g, "$1 $2")
      .replace(/([A-Z]+)([A-Z][a-z])/g, "$1 $2").toLowerCase();
    var words = s.split(/[^\p{L}\p{N}]+/u).filter(function (w) { return Array.from(w).length > 1; });
    (text.match(cjkPairs) || []).forEach(function (run) {
      var cs = Array.from(run);
      for (var i = 0; i + 1 < cs.length; i++) words.push(cs[i] + cs[i + 1]);
    });
    return Array.from(new Set(words));
  }

  var root = document.querySelector("script[src$='search-index.js']").getAttribute("src")
    .replace(/search-index\.js$/, "");
  var form = document.getElementById("search");
  var input = document.getElementById("q");
  var status = document.getElementById("status");
  var list = document.getElementById("results");

  function kinds() {
    var on = {};
    form.querySelectorAll("input[name=kind]").forEach(function (b) { on[b.value] = b.checked; });
    return on;
  }

  function staticSearch(q, limit) {
    var index = window.SEARCH_INDEX || { docs: [], terms: {} };
    var scores = new Map();
    tokenize(q).forEach(function (term) {
      var p = index.terms[term];
      if (!p) return;
      for (var i = 0; i < p.length; i += 2) scores.set(p[i], (scores.get(p[i]) || 0) + p[i + 1]);
    });
    var on = kinds();
    var hits = [];
    scores.forEach(function (score, i) {
      var d = index.docs[i];
      if (on[d[0]]) hits.push({ kind: d[0], url: d[1], title: d[2], date: d[3], snippet: d[4], project: d[5], score: score });
    });
    hits.sort(function (a, b) { return b.score - a.score || (a.url < b.url ? -1 : 1); });
    return hits.slice(0, limit);
  }

  function highlight(el, text, words) {
    if (!words.length) { el.textContent = text; return; }
    var escaped = words.map(function (w) { return w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"); });
    var re = new RegExp("(" + escaped.join("|") + ")", "giu");
    text.split(re).forEach(function (part, i) {
      if (i % 2) { var m = document.createElement("mark"); m.textContent = part; el.appendChild(m); }
      else el.appendChild(document.createTextNode(part));
    });
  }

  function show(q, hits, how) {
    list.replaceChildren();
    var words = tokenize(q);
    hits.forEach(function (h) {
      var li = document.createElement("li");
      var head = document.createElement("div");
      var a = document.createElement(h.url ? "a" : "span");
      if (h.url) a.href = root + h.url;
      a.textContent = h.title || "(untitled)";
      head.appendChild(a);
      var meta = document.createElement("span");
      meta.className = "muted";
      meta.textContent = " · " + h.kind + (h.project ? " · " + h.project : "") + (h.date ? " · " + h.date : "");
      head.appendChild(meta);
      var p = document.createElement("p");
      highlight(p, h.snippet || "", words);
      li.appendChild(head);
      li.appendChild(p);
      list.appendChild(li);
    });
    status.textContent = hits.length ? hits.length + (hits.length === 1 ? " result" : " results") + " (" + how + ")"
      : "No results for \u201c" + q + "\u201d.";
  }

  var seq = 0;
  function run() {
    var q = input.value.trim();
    var mine = ++seq;
    if (!q) { list.replaceChildren(); status.textContent = "Type words to search."; return; }
    if (location.protocol === "http:" || location.protocol === "https:") {
      var on = kinds();
      fetch(root + "api/search?q=" + encodeURIComponent(q) + "&k=50").then(function (r) {
        if (!r.ok) throw new Error(String(r.status));
        return r.json();
      }).then(function (hits) {
        if (mine === seq) show(q, hits.filter(function (h) { return on[h.kind]; }), "live");
      }).catch(function () { if (mine === seq) show(q, staticSearch(q, 50), "index"); });
    } else {
      show(q, staticSearch(q, 50), "index");
    }
  }

  var timer = null;
  input.addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(run, 120); });
  // only the kind boxes: a "change" of the text box (fired when it loses focus, e.g. as a result is
  // clicked) must not rebuild the list under the pointer
  form.addEventListener("change", function (e) { if (e.target.name === "kind") run(); });
  form.addEventListener("submit", function (e) { e.preventDefault(); run(); });
  var initial = new URLSearchParams(location.search).get("q");
  if (initial) { input.value = initial; run(); }
  window.copilotSearch = { tokenize: tokenize, search: staticSearch };
})();
