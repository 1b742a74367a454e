// Warden's page glue around textual-serve's terminal (textual.js, loaded just before this file):
// wait for the served fonts so every glyph is drawn with them, connect the websocket of this very
// host (ws: or wss: behind a TLS proxy), put the keyboard in the terminal without a click, and
// when the session ends say so under what the console printed.
(function () {
  "use strict";

  // Every face of the composite 'Roboto Mono' family (fonts.css): text, symbols, emoji.
  var SAMPLE = "Warden \u25cb\u25b6\u270b\u23f8\u2714\u2716\u2298\u26a0\u2192\u2026\ud83d\udd0e";
  var start = window.onload; // textual.js builds and connects its terminal here

  function bodyHas(cls) {
    return document.body.classList.contains(cls);
  }

  function whenBody(cls, then) {
    if (bodyHas(cls)) {
      then();
      return;
    }
    var seen = new MutationObserver(function () {
      if (bodyHas(cls)) {
        seen.disconnect();
        then();
      }
    });
    seen.observe(document.body, { attributes: true, attributeFilter: ["class"] });
  }

  function focusTerminal() {
    var input = document.querySelector("#terminal textarea");
    if (input) {
      input.blur(); // so focus() fires a focus event and the app hears it (AppFocus)
      input.focus();
    }
  }

  // The token came in the URL (?token=…) and is now a cookie: take it out of the address bar and
  // the history entry, keeping any other parameter (fontsize).
  (function forgetToken() {
    var params = new URLSearchParams(location.search);
    if (params.has("token")) {
      params.delete("token");
      var rest = params.toString();
      history.replaceState(null, "", location.pathname + (rest ? "?" + rest : "") + location.hash);
    }
  })();

  window.onload = function (event) {
    var terminal = document.getElementById("terminal");
    var scheme = location.protocol === "https:" ? "wss://" : "ws://";
    terminal.dataset.sessionWebsocketUrl = scheme + location.host + "/ws";
    var size = (terminal.dataset.fontSize || "16") + "px 'Roboto Mono'";
    var fonts = document.fonts
      ? Promise.all([document.fonts.load(size, SAMPLE), document.fonts.load("bold " + size, SAMPLE)])
      : Promise.resolve();
    fonts.catch(function () {}).then(function () {
      if (start) {
        start.call(window, event);
      }
      // Focus once the app draws: it has started and will hear the focus.
      whenBody("-first-byte", focusTerminal);
      whenBody("-closed", function () {
        var ended = document.getElementById("ended");
        ended.hidden = false;
        document.getElementById("restart").focus();
      });
    });
  };

  document.addEventListener("DOMContentLoaded", function () {
    document.getElementById("restart").addEventListener("click", function () {
      location.reload();
    });
  });
})();
