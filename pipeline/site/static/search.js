// Search without a server: the prebuilt index (search/: per term, the documents holding it, with the term's
// frequency in each and each one's length) ranked by BM25 over the query's words, with the weights of the
// warehouse's search() (k1 = 1.2, b = 0.75), ties broken as serve breaks them. The index is cut in files
// this page loads as a search needs them (search/index.js says how): the terms' shards and the documents' ranks,
// then the chunks holding the best documents. A position whose kind is "-" holds no document any more (a report
// that changed a session appended its documents anew): its postings are skipped. Served by
// `python -m pipeline serve`, the page asks the live search API first.
// Results are built with textContent only: nothing from the history is ever parsed as HTML.
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

  var root = document.querySelector("script[src$='search/index.js']").getAttribute("src")
    .replace(/search\/index\.js$/, "");
  var form = document.getElementById("search");
  var input = document.getElementById("q");
  var status = document.getElementById("status");
  var list = document.getElementById("results");
  var meta = window.SEARCH_META ||
    { version: "", shards: 1, chunk: 1, docs: 0, live: 0, avg_terms: 0, kinds: [], doc_kinds: "", rank_width: 1 };

  function kinds() {
    var on = {};
    form.querySelectorAll("input[name=kind]").forEach(function (b) { on[b.value] = b.checked; });
    return on;
  }

  // the index's files, each loaded once: a <script> (file:// pages cannot fetch) that hands its part over
  var terms = {}, docs = {}, ranks = "", loading = {};
  window.searchTerms = function (k, part) { terms[k] = part; };
  window.searchDocs = function (k, part) { docs[k] = part; };
  window.searchRanks = function (part) { ranks = part; };
  function rank(i) { return parseInt(ranks.substr(i * meta.rank_width, meta.rank_width), 36); }
  function load(name) {
    if (!loading[name]) {
      loading[name] = new Promise(function (resolve, reject) {
        var s = document.createElement("script");
        s.src = root + "search/" + name + ".js?v=" + encodeURIComponent(meta.version);
        s.onload = resolve;
        s.onerror = function () { delete loading[name]; reject(new Error("cannot load search/" + name + ".js")); };
        document.head.appendChild(s);
      });
    }
    return loading[name];
  }

  // a term's shard: the same polynomial hash of its code points as the report's (site.shard_of)
  function shardOf(term) {
    var h = 0;
    for (var ch of term) h = (h * 31 + ch.codePointAt(0)) % 1000003;
    return h % meta.shards;
  }

  function staticSearch(q, limit) {
    var words = tokenize(q);
    var shards = Array.from(new Set(words.map(shardOf)));
    var files = shards.map(function (k) { return "terms-" + k; }).concat(["ranks"]);
    return Promise.all(files.map(load)).then(function () {
      var scores = new Map();
      words.forEach(function (term) {
        var part = terms[shardOf(term)] || {};
        var p = Object.prototype.hasOwnProperty.call(part, term) ? part[term] : null;
        if (!p) return;
        var df = 0, i;
        for (i = 0; i < p.length; i += 3) if (meta.doc_kinds[p[i]] !== "-") df++;
        if (!df) return;
        // bm25_weight: ln(1 + (N - df + 0.5) / (df + 0.5)) * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * length / mean))
        var idf = Math.log(1 + (meta.live - df + 0.5) / (df + 0.5));
        for (i = 0; i < p.length; i += 3) {
          if (meta.doc_kinds[p[i]] === "-") continue;
          var w = idf * p[i + 1] * 2.2 / (p[i + 1] + 1.2 * (0.25 + 0.75 * p[i + 2] / meta.avg_terms));
          scores.set(p[i], (scores.get(p[i]) || 0) + w);
        }
      });
      var on = kinds();
      var best = [];
      scores.forEach(function (score, i) {
        if (on[meta.kinds[parseInt(meta.doc_kinds[i], 36)]]) best.push({ i: i, score: score });
      });
      // best first by the score serve shows (rounded to 4 places), ties by kind, session and place (ranks.js), as
      // serve breaks them
      best.forEach(function (h) { h.key = Math.round(h.score * 1e4); h.rank = rank(h.i); });
      best.sort(function (a, b) { return b.key - a.key || a.rank - b.rank; });
      best = best.slice(0, limit);
      var chunks = Array.from(new Set(best.map(function (h) { return Math.floor(h.i / meta.chunk); })));
      return Promise.all(chunks.map(function (j) { return load("docs-" + j); })).then(function () {
        return best.map(function (h) {
          var d = docs[Math.floor(h.i / meta.chunk)][h.i % meta.chunk];
          return { kind: d[0], url: d[1], title: d[2], date: d[3], snippet: d[4], project: d[5], score: h.score };
        });
      });
    });
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
    var fromIndex = function () {
      staticSearch(q, 50).then(function (hits) { if (mine === seq) show(q, hits, "index"); })
        .catch(function (e) { if (mine === seq) status.textContent = "The search index could not be read: " + e.message; });
    };
    if (location.protocol === "http:" || location.protocol === "https:") {
      var on = kinds();
      fetch(root + "api/search?q=" + encodeURIComponent(q) + "&k=50").then(function (r) {
        if (!r.ok) throw new Error(String(r.status));
        return r.json();
      }).then(function (hits) {
        if (mine === seq) show(q, hits.filter(function (h) { return on[h.kind]; }), "live");
      }).catch(function () { if (mine === seq) fromIndex(); });
    } else {
      fromIndex();
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
