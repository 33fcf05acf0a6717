// Progressive enhancements; every page works without this file.
(() => {
  "use strict";

  // The namespace switcher submits itself when changed.
  // A [data-autosubmit] select submits its form when a pointer picked the option. From the
  // keyboard, arrows and typed letters only move the choice (Chromium changes a closed select
  // at once): Enter, or the form's button, submits it.
  let pointer = null;
  document.addEventListener("pointerdown", (event) => { pointer = event.target; }, true);
  document.addEventListener("keydown", (event) => {
    const el = event.target;
    pointer = null;
    if (event.key === "Enter" && el instanceof HTMLSelectElement &&
        el.hasAttribute("data-autosubmit")) {
      event.preventDefault();
      el.form.requestSubmit();
    }
  }, true);
  document.addEventListener("change", (event) => {
    const el = event.target;
    if (el instanceof HTMLSelectElement && el.hasAttribute("data-autosubmit") &&
        pointer instanceof Node && (el === pointer || el.contains(pointer))) el.form.submit();
  });

  // A live region marked [data-pause-on-focus] skips its refresh while focus is inside it:
  // swapping it would throw keyboard focus back to the top of the page.
  document.addEventListener("htmx:beforeRequest", (event) => {
    const el = event.detail.elt;
    const active = document.activeElement;
    if (el instanceof Element && el.hasAttribute("data-pause-on-focus") && active &&
        active !== document.body && el.contains(active)) {
      event.preventDefault();
    }
  });

  // A region marked [data-swap-refusals] shows the server's 422 answer (a named bad input) in
  // place; htmx would otherwise keep the old content, which then reads as the answer. Other
  // failures replace it with a short notice rather than leave stale results.
  document.addEventListener("htmx:beforeSwap", (event) => {
    const target = event.detail.target;
    if (target instanceof Element && target.hasAttribute("data-swap-refusals") &&
        event.detail.xhr.status === 422) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
  });

  // A region marked [data-preview] (the schedule form's previews, the backfill count) only
  // reads, even when posted with the form's CSRF token: a failure replaces its results.
  const inPlace = (target) => target instanceof Element &&
    (target.hasAttribute("data-swap-refusals") || target.hasAttribute("data-preview"));

  for (const name of ["htmx:responseError", "htmx:sendError", "htmx:timeout"]) {
    document.addEventListener(name, (event) => {
      const target = event.detail.target;
      if (!inPlace(target)) return;
      if (posted(event) && !target.hasAttribute("data-preview")) {
        // An action (completing a task): keep the form and what was typed; say what happened.
        let line = target.querySelector(":scope > .request-outcome");
        if (!line) {
          line = document.createElement("p");
          line.className = "field-error request-outcome";
          line.setAttribute("role", "alert");
          target.prepend(line);
        }
        line.textContent = outcome(event);
        return;
      }
      // A paragraph (the backfill count) takes a span: a <p> cannot hold another.
      const note = document.createElement(target.tagName === "P" ? "span" : "p");
      note.className = "field-error";
      note.setAttribute("role", "alert");
      note.textContent = "Could not load this; change an input to try again.";
      target.replaceChildren(note);
    });
  }

  // A list's filter form ([data-url-synced]) shows the filters its URL applies. Back and
  // Forward may bring the page back with what was typed before leaving it (the back/forward
  // cache, or the browser restoring form state): reset each field to the value the server
  // wrote for this URL, so the boxes never disagree with the list.
  function syncFilters() {
    for (const form of document.querySelectorAll("form[data-url-synced]")) form.reset();
  }
  window.addEventListener("pageshow", (event) => {
    const entry = performance.getEntriesByType("navigation")[0];
    if (event.persisted || (entry && entry.type === "back_forward")) syncFilters();
  });
  document.addEventListener("htmx:historyRestore", syncFilters);

  // Plain (non-htmx) forms that need a confirmation.
  document.addEventListener("submit", (event) => {
    const form = event.target;
    const question = form.getAttribute && form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) event.preventDefault();
  });

  // A form answered with mistakes: focus its error summary, so they are read first (at 390 px
  // the first error may be far below the fold).
  document.addEventListener("DOMContentLoaded", () => {
    const summary = document.querySelector("[data-error-summary]");
    if (summary) summary.focus();
  });

  // A field focused for the user to go on with (autofocus on a refused or kept form, on load or
  // in a swapped card) puts the caret after what was typed, not in front of it.
  function caretToEnd() {
    const field = document.activeElement;
    if (!(field instanceof HTMLTextAreaElement || field instanceof HTMLInputElement)) return;
    if (!field.hasAttribute("autofocus")) return;
    const end = field.value.length;
    try {
      field.setSelectionRange(end, end);
    } catch (error) {
      // An input type without a caret (a number, a date): nothing to move.
    }
  }
  document.addEventListener("DOMContentLoaded", caretToEnd);
  document.addEventListener("htmx:afterSettle", caretToEnd);

  // The modal: a native <dialog> opened by [data-modal-opener] buttons that load its body.
  let openerId = null;
  let lastRequest = null;
  const modal = () => document.getElementById("modal");

  function openModal() {
    const dialog = modal();
    if (dialog && !dialog.open) dialog.showModal();
  }

  function focusTitle() {
    const title = document.getElementById("modal-title");
    const meta = document.querySelector("#modal-body [data-modal-title]");
    if (title && meta) title.textContent = meta.getAttribute("data-modal-title");
    if (title) title.focus();
  }

  document.addEventListener("htmx:beforeRequest", (event) => {
    const source = event.detail.elt;
    const target = event.detail.target;
    if (!target) return;
    if (target.id === "modal-body" || target.id === "history-events") {
      lastRequest = { path: event.detail.requestConfig.path, target: "#" + target.id,
                      swap: target.id === "modal-body" ? "innerHTML" : "beforeend" };
      const error = document.querySelector("#modal-body .load-error");
      if (error) error.hidden = true;
    }
    if (source && source.hasAttribute("data-modal-opener")) {
      openerId = source.id;
      document.getElementById("modal-body").innerHTML = '<p class="muted">Loading…</p>';
      openModal();
    }
  });

  // History rows are one Tab stop (a roving tabindex): the arrow keys, Home and End move
  // between events, so Load more is a few Tabs away however many rows are loaded.
  const historyRows = () =>
    Array.from(document.querySelectorAll("#history-events > li > details > summary"));
  let rowsBeforeLoad = 0;

  function makeTabStop(summary) {
    for (const row of historyRows()) row.setAttribute("tabindex", "-1");
    summary.setAttribute("tabindex", "0");
  }

  document.addEventListener("keydown", (event) => {
    const el = event.target;
    if (!(el instanceof HTMLElement) || !el.matches("#history-events summary")) return;
    const rows = historyRows();
    const at = rows.indexOf(el);
    const to = { ArrowDown: at + 1, ArrowUp: at - 1, Home: 0, End: rows.length - 1 }[event.key];
    if (to === undefined || to < 0 || to >= rows.length) return;
    event.preventDefault();
    makeTabStop(rows[to]);
    rows[to].focus();
  });

  document.addEventListener("focusin", (event) => {
    const el = event.target;
    if (el instanceof HTMLElement && el.matches("#history-events summary")) makeTabStop(el);
  });

  document.addEventListener("htmx:beforeRequest", (event) => {
    const target = event.detail.target;
    if (target && target.id === "history-events") rowsBeforeLoad = historyRows().length;
  });

  document.addEventListener("htmx:afterSwap", (event) => {
    const target = event.detail.target;
    if (target && target.id === "modal-body") focusTitle();
    // After Load more, focus the first event it loaded (not <body>).
    if (target && target.id === "history-events") {
      const first = historyRows()[rowsBeforeLoad];
      if (first) {
        makeTabStop(first);
        first.focus();
      }
    }
  });

  function showError() {
    const body = document.getElementById("modal-body");
    if (!body) return;
    let error = body.querySelector(".load-error");
    if (!error) {
      body.insertAdjacentHTML("beforeend", '<p class="load-error" role="alert">Could not load ' +
        'the history. <button type="button" data-retry>Retry</button></p>');
      error = body.querySelector(".load-error");
    }
    error.hidden = false;
    const loading = body.querySelector(".htmx-indicator");
    if (loading) loading.classList.remove("htmx-request");
  }

  for (const name of ["htmx:responseError", "htmx:sendError", "htmx:timeout"]) {
    document.addEventListener(name, (event) => {
      const target = event.detail.target;
      if (target && (target.id === "modal-body" || target.id === "history-events")) {
        if (target.id === "modal-body") target.innerHTML = "";
        showError();
      }
    });
  }

  document.addEventListener("click", (event) => {
    const el = event.target;
    if (!(el instanceof Element)) return;
    if (el.closest("[data-modal-close]")) modal().close();
    if (el.closest("[data-retry]") && lastRequest && window.htmx) {
      window.htmx.ajax("GET", lastRequest.path, { target: lastRequest.target, swap: lastRequest.swap });
    }
  });

  // Every other htmx request that fails says so. An action's result area ([data-action-result]:
  // trigger, backfill) tells what happened to the action; anything else (a live refresh, Load
  // more) puts a notice at the top of the page until a request succeeds again, so a page whose
  // server is gone never goes on looking fine.
  const handled = (target) => inPlace(target) ||
    (target instanceof Element && (target.id === "modal-body" || target.id === "history-events"));

  function refusal(xhr) {
    // A refusal is the console's error page: its heading and message say why.
    let reason = "";
    try {
      const page = new DOMParser().parseFromString(xhr.responseText || "", "text/html");
      const message = page.querySelector("main section p");
      if (message) reason = message.textContent.trim();
    } catch (error) { reason = ""; }
    return "Error " + xhr.status + (reason ? ": " + reason : ".");
  }

  function failure(event) {
    if (event.type === "htmx:sendError") return { why: "could not reach the server", sent: null };
    if (event.type === "htmx:timeout") return { why: "the server did not answer in time", sent: null };
    return { why: refusal(event.detail.xhr), sent: false };
  }

  // Whether the failed request was an action (a POST), and what to tell of it.
  const posted = (event) => {
    const config = event.detail.requestConfig;
    return Boolean(config && String(config.verb).toLowerCase() === "post");
  };

  function outcome(event) {
    const { why, sent } = failure(event);
    return sent === false ? "Not done. " + why
      : "Could not tell whether it was done: " + why + ". Check before trying again.";
  }

  function notice(text) {
    let line = document.getElementById("request-failed");
    if (!line) {
      const main = document.getElementById("main");
      if (!main) return;
      main.insertAdjacentHTML("afterbegin",
        '<p id="request-failed" class="flash flash-error" role="alert"></p>');
      line = document.getElementById("request-failed");
    }
    line.textContent = text;
  }

  for (const name of ["htmx:responseError", "htmx:sendError", "htmx:timeout"]) {
    document.addEventListener(name, (event) => {
      const target = event.detail.target;
      if (handled(target)) return;
      const { why, sent } = failure(event);
      if (target instanceof Element && target.hasAttribute("data-action-result")) {
        const line = document.createElement("p");
        line.className = "field-error";
        line.setAttribute("role", "alert");
        line.textContent = sent === false ? "Not done. " + why
          : "Could not tell whether it was done: " + why +
            ". Check the history before trying again.";
        target.replaceChildren(line);
        return;
      }
      if (posted(event)) {
        notice(outcome(event));
        return;
      }
      // The console's times are 24-hour UTC; only a polling region tries again by itself.
      const at = new Date().toISOString().slice(11, 19) + " UTC";
      const source = event.detail.elt;
      const polling = source instanceof Element &&
        /\bevery\b/.test(source.getAttribute("hx-trigger") || "");
      notice("Could not update this page at " + at + " (" + why + "): what it shows may be " +
        "out of date. " + (polling ? "It keeps trying." : "Reload the page to try again."));
    });
  }

  document.addEventListener("htmx:afterRequest", (event) => {
    const line = document.getElementById("request-failed");
    if (line && event.detail.successful) line.remove();
  });

  // A background preview whose form token had gone stale brings a fresh one
  // (templates/_paused_preview.html): every form of the page takes it, so Save works again.
  document.addEventListener("htmx:afterSwap", () => {
    const fresh = document.querySelector("[data-fresh-csrf]");
    if (!fresh) return;
    const token = fresh.getAttribute("data-fresh-csrf");
    fresh.removeAttribute("data-fresh-csrf");
    if (!token) return;
    for (const input of document.querySelectorAll('input[name="csrf_token"]')) input.value = token;
  });

  // Focus returns to the button that opened the modal (found by id: a live refresh may
  // have replaced the element itself).
  document.addEventListener("close", (event) => {
    if (event.target && event.target.id === "modal" && openerId) {
      const opener = document.getElementById(openerId);
      if (opener) opener.focus();
    }
  }, true);
})();
