// The handoffs page: every open handoff (behind the server's token, at /m/) or the one a
// notification's link opens (/m/h/ID#k=LINK). Every string from the ledger is set as text, never as
// markup. The link's token is read from the fragment (never sent by the browser), kept for this tab
// only, and sent in a header.
(function () {
  "use strict";

  var GLYPH = { permission: "✋", confirm: "✋", direction: "✋", exception: "⚠", acceptance: "✋", alignment: "✋" };
  var list = document.getElementById("list");
  var banner = document.getElementById("banner");
  var count = document.getElementById("count");
  var linkMatch = location.pathname.match(/^\/m\/h\/(\d+)$/);
  var linkHid = linkMatch ? linkMatch[1] : null;
  var linkToken = null;
  var editing = false;

  if (linkHid) {
    var key = "warden-link-" + linkHid;
    var m = location.hash.match(/(?:^#|&)k=([^&]+)/);
    if (m) {
      linkToken = decodeURIComponent(m[1]);
      try { sessionStorage.setItem(key, linkToken); } catch (e) { /* private mode: this load only */ }
    } else {
      try { linkToken = sessionStorage.getItem(key); } catch (e) { linkToken = null; }
    }
    history.replaceState(null, "", location.pathname); // the link leaves the address bar
  } else if (/[?&]token=/.test(location.search)) {
    history.replaceState(null, "", location.pathname); // the server set its cookie
  }

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function say(text) {
    banner.textContent = text;
    banner.hidden = !text;
  }

  function ago(isoText) {
    var t = Date.parse(isoText);
    if (isNaN(t)) return "";
    var s = Math.max(0, (Date.now() - t) / 1000);
    if (s < 90) return "just now";
    if (s < 5400) return Math.round(s / 60) + " min ago";
    if (s < 129600) return Math.round(s / 3600) + " h ago";
    return Math.round(s / 86400) + " days ago";
  }

  function headers(json) {
    var h = {};
    if (json) h["Content-Type"] = "application/json";
    if (linkToken) h["X-Warden-Link"] = linkToken;
    return h;
  }

  function call(method, url, body) {
    return fetch(url, {
      method: method, headers: headers(body !== undefined), credentials: "same-origin", cache: "no-store",
      body: body === undefined ? undefined : JSON.stringify(body)
    }).then(function (r) {
      return r.json().catch(function () { return { error: "the server answered " + r.status }; })
        .then(function (doc) { return { status: r.status, doc: doc }; });
    }, function () {
      return { status: 0, doc: { error: "the server cannot be reached" } };
    });
  }

  function diffBlock(text) {
    var pre = el("pre", "diff");
    text.split("\n").forEach(function (line) {
      var cls = line.startsWith("+++") || line.startsWith("---") ? "hunk"
        : line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : line.startsWith("@@") ? "hunk" : "";
      pre.appendChild(el("span", cls, line + "\n"));
    });
    return pre;
  }

  function card(h, canAnswer, why) {
    var c = el("article", "card");
    c.dataset.handoff = h.id;
    var where = el("div", "where");
    where.appendChild(el("span", "badge " + h.kind, (GLYPH[h.kind] || "✋") + " " + h.kind));
    where.appendChild(el("span", "task", h.task_id + " · " + h.node));
    where.appendChild(el("span", "", "#" + h.id + " · " + ago(h.opened_at)));
    c.appendChild(where);
    c.appendChild(el("p", "question", h.question));
    if (h.permission) {
      c.appendChild(el("div", "label", "Tool"));
      c.appendChild(el("pre", "tool", h.permission.tool));
      if (h.permission.diff) {
        c.appendChild(el("div", "label", "Change" + (h.permission.file ? " to " + h.permission.file : "")));
        c.appendChild(diffBlock(h.permission.diff));
      } else if (h.permission.input) {
        c.appendChild(el("div", "label", "Input"));
        c.appendChild(el("pre", "input", h.permission.input));
      }
    }
    var keys = Object.keys(h.context || {});
    if (keys.length) {
      var d = el("details");
      d.appendChild(el("summary", "", "Context (" + keys.length + ")"));
      var dl = el("dl");
      keys.forEach(function (k) { dl.appendChild(el("dt", "", k)); dl.appendChild(el("dd", "", h.context[k])); });
      d.appendChild(dl);
      c.appendChild(d);
    }
    if (h.kind === "permission" && h.rules && h.rules.length) { // what a permission request may already be covered by
      c.appendChild(el("div", "label", "Rules granted in " + h.task_id));
      var ul = el("ul", "rules");
      h.rules.forEach(function (r) {
        ul.appendChild(el("li", "", r.text + " · by " + r.by + (r.session ? " · session " + String(r.session).slice(0, 8) : "")));
      });
      c.appendChild(ul);
    }
    if (h.status !== "open") {
      c.appendChild(el("p", "result", "✔ " + h.status + (h.resolved_by ? " by " + h.resolved_by : "")
        + (h.resolution_option ? " (" + h.resolution_option + ")" : "")));
      return c;
    }
    if (!canAnswer) {
      c.appendChild(el("p", "readonly", why || "Read-only server: shown here, answered elsewhere."));
      return c;
    }
    var form = el("form");
    form.noValidate = true;
    var choice = null;
    var send = el("button", "send", "Send answer");
    send.type = "submit";
    if (h.options.length) {
      var fs = el("fieldset");
      fs.appendChild(el("legend", "", "Answer with"));
      h.options.forEach(function (o) {
        var lab = el("label", "option" + (o.id === h.recommendation ? " recommended" : ""));
        var input = el("input");
        input.type = "radio";
        input.name = "option-" + h.id;
        input.value = o.id;
        input.addEventListener("change", function () { choice = o.id; send.disabled = false; });
        lab.appendChild(input);
        var text = el("span", "text");
        text.appendChild(el("strong", "", o.label));
        if (o.id === h.recommendation) text.appendChild(el("span", "rec", "★ recommended"));
        if (o.consequence) text.appendChild(el("span", "consequence", o.consequence));
        lab.appendChild(text);
        fs.appendChild(lab);
      });
      form.appendChild(fs);
      send.disabled = true;
    }
    var area = el("textarea");
    area.name = "answer";
    area.maxLength = 4000;
    area.placeholder = h.options.length ? "A note for the agent (optional)" : "Your answer";
    area.addEventListener("focus", function () { editing = true; });
    area.addEventListener("blur", function () { editing = false; });
    form.appendChild(area);
    form.appendChild(send);
    var result = el("p", "result");
    result.hidden = true;
    form.appendChild(result);
    form.addEventListener("submit", function (ev) {
      ev.preventDefault();
      send.disabled = true;
      send.textContent = "Sending…";
      var url = linkHid ? "/m/api/link/" + h.id + "/answer" : "/m/api/handoffs/" + h.id + "/answer";
      call("POST", url, { option: choice, answer: area.value, revision: h.revision }).then(function (r) {
        result.hidden = false;
        if (r.status === 200) {
          result.className = "result ok";
          result.textContent = "✔ Answered" + (r.doc.option ? " (" + r.doc.option + ")" : "")
            + " — recorded as " + r.doc.by
            + (r.doc.differed && r.doc.differed.length ? "\nSince you opened it: " + r.doc.differed.join("; ") : "");
          form.querySelectorAll("input, textarea, button").forEach(function (x) { x.disabled = true; });
          send.textContent = "Answered";
        } else {
          result.className = "result bad";
          result.textContent = "✖ Not answered: " + (r.doc.error || ("the server answered " + r.status));
          send.textContent = "Send answer";
          send.disabled = r.status === 409 || r.status === 403 || (h.options.length > 0 && choice === null);
        }
      });
    });
    c.appendChild(form);
    return c;
  }

  function show(items, readOnly, why) {
    list.textContent = "";
    if (!items.length) {
      list.appendChild(el("p", "quiet", "Nothing waits for you."));
    }
    items.forEach(function (h) { list.appendChild(card(h, !readOnly && (h.can_answer !== false), why)); });
    count.textContent = linkHid ? "" : items.length + " open";
  }

  function load() {
    if (editing) return;
    if (linkHid) {
      if (!linkToken) {
        say("This link has no key: open it again from the notification.");
        list.textContent = "";
        return;
      }
      call("GET", "/m/api/link/" + linkHid).then(function (r) {
        if (r.status !== 200) {
          say(r.doc.error || "this link cannot be used");
          list.textContent = "";
          return;
        }
        say(r.doc.link || (r.doc.read_only ? "Read-only server: shown here, answered elsewhere." : ""));
        show([r.doc], !r.doc.can_answer, r.doc.link);
      });
      return;
    }
    call("GET", "/m/api/handoffs").then(function (r) {
      if (r.status !== 200) {
        say(r.doc.error || "the server answered " + r.status);
        return;
      }
      say(r.doc.read_only ? "Read-only server: the handoffs are shown, not answered here." : "");
      show(r.doc.handoffs, r.doc.read_only);
    });
  }

  document.getElementById("refresh").addEventListener("click", function () { editing = false; load(); });
  document.addEventListener("visibilitychange", function () { if (!document.hidden) load(); });
  load();
})();
