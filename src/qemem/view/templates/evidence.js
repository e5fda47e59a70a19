"use strict";
/* The evidence view: builds DOM from an evidence record. Data is inserted as text only. */
var qemem = (function () {
  function el(tag, attrs) {
    var node = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach(function (k) {
        if (attrs[k] === null || attrs[k] === undefined || attrs[k] === false) return;
        if (k === "text") node.textContent = String(attrs[k]);
        else if (k === "onclick") node.addEventListener("click", attrs[k]);
        else node.setAttribute(k, String(attrs[k]));
      });
    }
    for (var i = 2; i < arguments.length; i++) add(node, arguments[i]);
    return node;
  }
  function add(node, child) {
    if (child === null || child === undefined || child === false) return;
    if (Array.isArray(child)) { child.forEach(function (c) { add(node, c); }); return; }
    node.appendChild(typeof child === "object" ? child : document.createTextNode(String(child)));
  }
  function fmtDate(iso) {
    if (!iso) return "unknown date";
    var d = new Date(iso);
    if (isNaN(d.getTime())) return iso;
    return d.toLocaleDateString("en-GB", { weekday: "long", day: "numeric", month: "long",
      year: "numeric" }) + ", " + iso.slice(11, 16);
  }
  function norm(s) { return s.toLowerCase().replace(/\s+/g, " "); }
  /* [start, end) of the quote inside text, or null: exact (case and spacing ignored),
     then the longest leading run of its words. */
  function findQuote(text, quote) {
    if (!quote) return null;
    var hay = norm(text), words = norm(quote).replace(/^["'\s]+|["'.!?\s]+$/g, "").split(" ");
    for (var n = words.length; n >= Math.min(3, words.length); n--) {
      var needle = words.slice(0, n).join(" ");
      var at = hay.indexOf(needle);
      if (needle && at >= 0) return mapSpan(text, at, at + needle.length);
    }
    return null;
  }
  function mapSpan(text, start, end) {
    /* positions in the whitespace-collapsed text back to the original text */
    var map = [], prevSpace = false;
    for (var i = 0; i < text.length; i++) {
      var space = /\s/.test(text[i]);
      if (space && prevSpace) continue;
      map.push(i); prevSpace = space;
    }
    map.push(text.length);
    return [map[start], map[Math.min(end, map.length - 1)]];
  }
  function highlighted(text, quotes) {
    var span = null;
    for (var i = 0; i < quotes.length && !span; i++) span = findQuote(text, quotes[i]);
    if (!span) return [text];
    return [text.slice(0, span[0]), el("mark", { text: text.slice(span[0], span[1]) }),
      text.slice(span[1])];
  }
  function flash(node) {
    node.classList.remove("flash"); void node.offsetWidth; node.classList.add("flash");
  }
  function jump(id) {
    var node = document.getElementById(id);
    if (!node) return;
    node.scrollIntoView({ block: "center" });
    node.focus({ preventScroll: true });
    flash(node);
  }
  function yesNo(v) { return v === null || v === undefined ? "–" : v ? "yes" : "no"; }

  function render(root, ev, opts) {
    opts = opts || {};
    var P = opts.prefix || "";
    var pool = ev.pool.map(function (p) {
      return { space: p[0], id: p[1], round: p[2], score: p[3], reasons: p[4], more: p[5] };
    });
    var S = ev.sources || { turns: {}, episodes: {}, facts: {}, sessions: {} };
    var gold = opts.evidence || [];
    var visible = new Set(ev.visible || []);
    var times = ev.pool_times || {};
    var cardsBySource = {};
    ev.cards.forEach(function (c, n) {
      c.sources.forEach(function (s) { (cardsBySource[s] = cardsBySource[s] || []).push(n); });
    });
    var pooled = new Set(pool.map(function (p) { return p.id; }));
    function spaceOf(id) {
      return S.turns[id] ? "t" : S.episodes[id] ? "e" : S.facts[id] ? "f" : null;
    }
    function sourceLink(id) {
      var sp = spaceOf(id);
      if (!sp) return el("span", { class: "badge bad", title: "names no memory", text: id + " ?" });
      return el("button", { class: "link", type: "button", "data-target": P + sp + "-" + id,
        onclick: function () { jump(P + sp + "-" + id); }, text: id });
    }
    var out = [];
    if (opts.header !== false) {
      out.push(el("h1", { text: ev.question }));
      out.push(el("div", { class: "answer", text: ev.answer || "(no answer: retrieval mode)" }));
    }
    if (opts.gold !== undefined) {
      out.push(el("div", null, el("strong", { text: "Gold answer: " }), String(opts.gold)));
    }
    var c = ev.cost;
    out.push(el("div", { class: "costline" }, "mode " + ev.mode + " · " + c.calls + " LLM calls · " +
      c.input_tokens + " in / " + c.output_tokens + " out tokens · USD " +
      (c.usd === null || c.usd === undefined ? "n/a" : Number(c.usd).toFixed(5)) + " · " +
      c.seconds + " s · termination " + (ev.termination || "–")));
    if (opts.evidence) {
      var cited = new Set(ev.citations || []);
      out.push(el("div", { class: "row evidence-status" }, el("strong", { text: "Annotated evidence: " }),
        gold.length ? gold.map(function (id) {
          var state = cited.has(id) ? ["ok", "cited"] : visible.has(id) ? ["warn", "in answer context, not cited"]
            : pooled.has(id) ? ["warn", "pooled, not cited"] : S.turns[id] ? ["bad", "never retrieved"]
            : ["bad", "not in memory"];
          var chip = el("span", { class: "badge " + state[0], text: id + ": " + state[1] });
          return [S.turns[id] ? el("button", { class: "link", type: "button", "data-target": P + "t-" + id,
            onclick: function () { jump(P + "t-" + id); } }, chip) : chip, " "];
        }) : "none"));
    }
    if (ev.degradations.length) {
      out.push(el("div", { class: "warn", text: "degraded: " + ev.degradations.join("; ") }));
    }

    /* cards */
    out.push(el("h2", { text: "Cards (" + ev.cards.length + ")" }));
    if (!ev.cards.length) out.push(el("p", { class: "muted", text: "No cards in this mode or round." }));
    ev.cards.forEach(function (card, n) {
      var t = card.resolved_time;
      var agree = card.time_agrees === true ? el("span", { class: "badge ok", text: "agrees" })
        : card.time_agrees === false ? el("span", { class: "badge bad", text: "disagrees" }) : null;
      var basis = { quote: "from the quote", cited: "from " + (card.time_source || "a cited turn"),
        session: card.time_event ? "“" + card.time_event + "” is event-relative; said on"
          : "no expression; said on" }[card.time_basis] || "";
      var written = card.verified && (card.grounded_in === "episode" || card.grounded_in === "fact")
        ? el("span", { class: "badge warn", text: "model-written " + card.grounded_in }) : null;
      var planned = card.planned ? el("span", { class: "badge warn", text: "planned" }) : null;
      out.push(el("article", { class: "card", id: P + "card-" + n, tabindex: "-1" },
        el("div", { class: "claim" }, (n + 1) + ". " + card.claim),
        el("div", { class: "row" },
          card.verified
            ? el("span", { class: "badge ok", text: "verified " + card.score.toFixed(2) })
            : el("span", { class: "badge bad", text: "unverified " + card.score.toFixed(2) }),
          card.matched_source ? [" grounded in ", sourceLink(card.matched_source)] : " not grounded",
          el("span", { class: "muted", text: " · sources: " }),
          card.sources.map(function (s, i) { return [i ? ", " : "", sourceLink(s)]; }),
          card.unresolved_sources.length ? el("span", { class: "bad",
            text: " (unresolved: " + card.unresolved_sources.join(", ") + ")" }) : null,
          el("span", { class: "muted", text: " · round " + card.round }), " ", written),
        card.quote ? el("div", { class: "row quote", text: "“" + card.quote + "”" }) : null,
        el("div", { class: "row" }, el("span", { class: "muted", text: "relation: " }),
          card.relation || "–", el("span", { class: "muted", text: " · time: " }),
          card.shown_time === undefined ? "" : (card.shown_time || "–") + " ",
          el("span", { class: "muted", text: "(model " + (card.time || "–") + " · rules " +
            (basis ? basis + " " : "") + (t ? t.phrase : "–") + ") " }), agree, " ", planned)));
    });

    /* cited sources: turns in their sessions with context, episodes, facts */
    var quotesOf = {};
    ev.cards.forEach(function (card) {
      card.sources.forEach(function (s) { (quotesOf[s] = quotesOf[s] || []).push(card.quote); });
    });
    var show = {}, focus = {};
    function around(id) {
      var t = S.turns[id];
      if (!t) return;
      focus[id] = true;
      Object.keys(S.turns).forEach(function (k) {
        var u = S.turns[k];
        if (u.session === t.session && Math.abs(u.position - t.position) <= 2) show[k] = true;
      });
    }
    Object.keys(cardsBySource).forEach(around);
    gold.forEach(around);
    var shown = Object.keys(S.turns).filter(function (k) { return show[k]; });
    shown.sort(function (a, b) {
      return S.turns[a].session - S.turns[b].session || S.turns[a].position - S.turns[b].position;
    });
    out.push(el("h2", { text: "Cited turns in their sessions" }));
    if (!shown.length) out.push(el("p", { class: "muted", text: "No turn is cited." }));
    var blocks = [], last = null;
    shown.forEach(function (id) {
      var t = S.turns[id];
      if (!last || last.session !== t.session || t.position - last.position > 1) {
        blocks.push({ session: t.session, ids: [] });
      }
      blocks[blocks.length - 1].ids.push(id);
      last = t;
    });
    blocks.forEach(function (b) {
      out.push(el("section", { class: "session", "aria-label": "session " + b.session },
        el("header", { text: "Session " + b.session + " · " + fmtDate(S.sessions[String(b.session)]) }),
        b.ids.map(function (id) {
          var t = S.turns[id], cited = !!cardsBySource[id], isGold = gold.indexOf(id) >= 0;
          var tags = [];
          if (cited) tags.push(el("span", { class: "badge ok", text: "cited by card " +
            cardsBySource[id].map(function (n) { return n + 1; }).join(", ") }));
          if (isGold) tags.push(el("span", { class: "badge gold", text: "annotated evidence" }));
          if (isGold && !pooled.has(id)) tags.push(el("span", { class: "badge bad", text: "never retrieved" }));
          else if (isGold && !visible.has(id)) tags.push(el("span", { class: "badge warn", text: "not in answer context" }));
          return el("div", { class: "turn " + (cited ? "cited" : focus[id] ? "" : "context"),
            id: P + "t-" + id, tabindex: "-1", "data-turn": id },
            el("span", { class: "tid", text: id }), el("span", { class: "who", text: t.speaker }),
            el("span", { class: "text" }, cited ? highlighted(t.text, quotesOf[id]) : t.text,
              tags.length ? el("div", { class: "tags" }, tags) : null));
        })));
    });
    gold.filter(function (id) { return !S.turns[id]; }).forEach(function (id) {
      out.push(el("p", { class: "bad", text: "Annotated evidence " + id + " is not in the memory." }));
    });
    var citedEpisodes = Object.keys(cardsBySource).filter(function (id) { return S.episodes[id]; });
    var citedFacts = Object.keys(cardsBySource).filter(function (id) { return S.facts[id]; });
    if (citedFacts.length || citedEpisodes.length) {
      out.push(el("h3", { text: "Cited facts and episodes" }));
    }
    citedFacts.forEach(function (id) {
      var f = S.facts[id];
      out.push(el("div", { class: "fact", id: P + "f-" + id, tabindex: "-1" },
        el("strong", { text: "Fact " + id + ": " }), f.content,
        el("div", { class: "muted" }, "learned in session " + f.session + " from ",
          f.episode_ids.map(function (e, i) {
            var ep = S.episodes[e];
            return [i ? ", " : "", e + (ep ? " (" + ep.title + ")" : "")];
          }))));
    });
    citedEpisodes.forEach(function (id) {
      var e = S.episodes[id];
      out.push(el("div", { class: "episode", id: P + "e-" + id, tabindex: "-1" },
        el("strong", { text: "Episode " + id + ": " + e.title }),
        el("span", { class: "muted", text: " · session " + e.session + " · " +
          fmtDate(S.sessions[String(e.session)]) }),
        el("p", { text: e.content }),
        el("div", { class: "muted", text: "First turns:" }),
        e.turn_ids.filter(function (t) { return S.turns[t]; }).slice(0, 12).map(function (tid) {
          var t = S.turns[tid];
          return el("div", { class: "turn context" }, el("span", { class: "tid", text: tid }),
            el("span", { class: "who", text: t.speaker }),
            el("span", { class: "text" }, highlighted(t.text, quotesOf[id] || [])));
        })));
    });

    /* plan and rounds */
    var plan = ev.plan;
    out.push(el("h2", { text: "Plan and rounds" }));
    out.push(el("dl", { class: "kv" },
      el("dt", { text: "need" }), el("dd", { text: plan.need || "–" }),
      el("dt", { text: "answer type" }), el("dd", { text: plan.answer_type }),
      el("dt", { text: "flags" }), el("dd", { text: (plan.aggregate ? "aggregate" : "single") +
        ", " + (plan.temporal ? "temporal" : "not temporal") + " · planned by " + plan.source +
        (plan.note ? " (" + plan.note + ")" : "") })));
    ev.rounds.forEach(function (r) {
      var items = pool.filter(function (p) { return p.round === r.round; });
      var count = { episode: 0, fact: 0, turn: 0 };
      items.forEach(function (p) { count[p.space] += 1; });
      var fb = r.feedback;
      out.push(el("section", { class: "round" },
        el("h3", { text: r.round === 0 ? "Round 0: initial pool" : "Round " + r.round + ": refinement" }),
        el("div", { class: "muted", text: "queries:" }),
        el("ol", { class: "queries", start: "0" }, r.queries.map(function (q) { return el("li", { text: q }); })),
        el("div", { text: "new candidates: " + count.episode + " episodes, " + count.fact +
          " facts, " + count.turn + " turns" + (r.round ? " (" + items.map(function (p) {
            return p.id; }).slice(0, 20).join(", ") + (items.length > 20 ? ", …" : "") + ")" : "") }),
        el("div", { text: "cards made: " + ev.cards.filter(function (cd) {
          return cd.round === r.round; }).length }),
        fb ? el("div", null, fb.sufficient ? el("span", { class: "badge ok", text: "sufficient" })
          : el("span", { class: "badge warn", text: "not sufficient" }),
          fb.missing ? " missing: " + fb.missing : "",
          fb.follow_up_queries.length ? " · follow-up: " + fb.follow_up_queries.join(" | ") : "")
          : null,
        r.degraded ? el("div", { class: "bad", text: "degraded: " + r.degraded }) : null));
    });

    /* pool by space */
    out.push(el("h2", { text: "Pool by space (" + pool.length + " candidates)" }));
    [["episode", "Episodes"], ["fact", "Facts"], ["turn", "Turns"]].forEach(function (sp) {
      var items = pool.filter(function (p) { return p.space === sp[0]; });
      if (!items.length) return;
      out.push(el("h3", { text: sp[1] + " (" + items.length + ")" }));
      out.push(el("div", { class: "table-wrap" }, el("table", null,
        el("thead", null, el("tr", null, el("th", { text: "id" }), el("th", { text: "text" }),
          el("th", { class: "num", text: "round" }), el("th", { class: "num", text: "score" }),
          el("th", { text: "why pooled" }), el("th", { text: "carded" }))),
        el("tbody", null, items.map(function (p) {
          var rec = sp[0] === "turn" ? S.turns[p.id] : sp[0] === "episode" ? S.episodes[p.id] : S.facts[p.id];
          var text = !rec ? "" : sp[0] === "turn" ? rec.speaker + ": " + rec.text
            : sp[0] === "episode" ? rec.title + ". " + rec.content : rec.content;
          var by = cardsBySource[p.id] || [];
          var status = el("span", { class: "status muted" });
          var button = el("button", { class: "link", type: "button", "aria-expanded": "false",
            text: by.length ? "yes: card " + by.map(function (n) { return n + 1; }).join(", ") : "no",
            onclick: function () {
              button.setAttribute("aria-expanded", "true");
              if (by.length) { status.textContent = ""; jump(P + "card-" + by[0]); }
              else status.textContent = " not cited by any card" +
                (visible.has(p.id) ? "; in the answer context" : "");
            } });
          return el("tr", { class: "item" + (by.length ? " carded" : ""), id: P + "p-" + p.id },
            el("td", { class: "tid", text: p.id }),
            el("td", null, el("div", { class: "clip", title: text, text: text }),
              times[p.id] ? el("div", { class: "muted", text: "times: " + times[p.id].join("; ") }) : null),
            el("td", { class: "num", text: p.round }), el("td", { class: "num", text: p.score.toFixed(4) }),
            el("td", { class: "why" }, el("div", { class: "clip", title: p.reasons,
              text: p.reasons + (p.more ? " (+" + p.more + " more)" : "") })),
            el("td", null, button, status));
        })))));
    });
    add(root, out);
    return root;
  }
  return { render: render, el: el, jump: jump };
})();
